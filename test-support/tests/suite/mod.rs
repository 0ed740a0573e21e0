mod local_model;
