mod cli_agents;
mod context_reset;
mod episode_control;
mod planted_links;
mod real_cli_agent;
mod sealed_process;
mod self_check;
mod start_order;
