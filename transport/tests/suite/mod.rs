mod bus;
mod runtime;
mod start_order;
