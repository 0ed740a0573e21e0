//! One Redis command on a fresh connection, for the helpers that watch servers (replication,
//! sentinels).

use std::time::Duration;

/// Bounds connecting and each reply.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// One command to 127.0.0.1:`port` on a fresh connection, bounded by a short timeout.
pub(crate) async fn command(port: u16, args: &[&str]) -> anyhow::Result<redis::Value> {
    command_as(port, None, args).await
}

/// [`command`] after `AUTH password`, when given.
pub async fn command_as(
    port: u16,
    password: Option<&str>,
    args: &[&str],
) -> anyhow::Result<redis::Value> {
    let url = match password {
        Some(p) => format!("redis://:{p}@127.0.0.1:{port}"),
        None => format!("redis://127.0.0.1:{port}"),
    };
    let client = redis::Client::open(url)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(COMMAND_TIMEOUT))
        .set_response_timeout(Some(COMMAND_TIMEOUT));
    let exchange = async {
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let mut cmd = redis::cmd(args.first().copied().unwrap_or("PING"));
        for arg in args.iter().skip(1) {
            cmd.arg(*arg);
        }
        cmd.query_async::<redis::Value>(&mut conn).await
    };
    Ok(tokio::time::timeout(COMMAND_TIMEOUT * 2, exchange).await??)
}
