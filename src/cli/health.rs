//! `sitemapd health`: a container health check without a shell or curl.

use anyhow::Context;

/// Asks the local service for /healthz over plain HTTP/1.0.
pub(super) async fn run(listen: std::net::SocketAddr) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut address = listen;
    if address.ip().is_unspecified() {
        address.set_ip(match address {
            std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(address).await?;
        stream.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(std::time::Duration::from_secs(3), exchange)
        .await
        .with_context(|| format!("no answer from {address} within 3 s"))??;
    anyhow::ensure!(
        answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200"),
        "{address}/healthz did not answer 200"
    );
    Ok(())
}
