mod continuation;
mod loop_arm;
mod one_clause;
mod suite_dry_run;
