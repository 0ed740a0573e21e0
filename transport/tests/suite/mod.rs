mod bus;
mod cluster;
mod runtime;
mod start_order;
