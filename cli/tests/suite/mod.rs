mod checkout_submit;
mod standin;
mod up;
mod watch;
