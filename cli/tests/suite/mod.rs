mod browse;
mod checkout_submit;
mod diff_rounds;
mod standin;
mod up;
mod watch;
