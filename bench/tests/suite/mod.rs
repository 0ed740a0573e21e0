mod continuation;
mod loop_arm;
mod suite_dry_run;
