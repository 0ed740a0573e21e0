mod run_store;
