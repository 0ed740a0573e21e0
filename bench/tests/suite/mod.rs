mod continuation;
mod loop_arm;
