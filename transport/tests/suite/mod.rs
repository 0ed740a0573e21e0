mod bus;
mod claims;
mod cluster;
mod runtime;
mod start_order;
