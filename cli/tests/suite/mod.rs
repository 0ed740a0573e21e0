mod browse;
mod checkout_submit;
mod desktop_check;
mod diff_rounds;
mod standin;
mod up;
mod verify_offline;
mod watch;
