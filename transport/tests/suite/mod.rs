mod bus;
