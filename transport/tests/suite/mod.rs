mod bus;
mod runtime;
