mod check_secrets;
mod contract_checks;
mod episodes;
mod host_isolation;
mod isolation;
mod judge_deferral;
mod rubric;
mod warm_workspaces;
