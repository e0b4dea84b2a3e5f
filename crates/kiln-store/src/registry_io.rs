//! What every kiln client of an OCI registry shares (the record store's
//! OCI backend here, and the engine crate's registry client): the TLS
//! provider, which registries are spoken to in plain HTTP, and retrying a
//! registry call that failed with a transient server error.

use std::future::Future;
use std::time::Duration;

use oci_client::errors::OciDistributionError;

/// oci-client's HTTPS is rustls without a built-in crypto provider: this
/// installs ring, which the workspace already builds. A provider installed
/// earlier is kept. Call before building an oci-client `Client`.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `localhost`, `127.0.0.0/8` or `::1` (`[::1]`), with or without a port:
/// registries dockerd itself treats as insecure, spoken to in plain HTTP.
pub fn is_loopback(domain: &str) -> bool {
    if let Some(v6) = domain.strip_prefix('[') {
        return v6
            .split_once(']')
            .and_then(|(addr, _)| addr.parse::<std::net::Ipv6Addr>().ok())
            .is_some_and(|a| a.is_loopback());
    }
    let host = domain.split_once(':').map_or(domain, |(h, _)| h);
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback())
}

/// Runs a registry call, and again after 50 ms and 250 ms while the
/// registry answers 5xx (not 501) or the connection breaks (not a
/// timeout: a server that does not answer is not asked twice). Every call
/// kiln makes is idempotent and starts over (an upload opens a new
/// session), the distribution filesystem driver answers 500 to a tag read
/// that races a write of the same tag, and an answer lost on the way back
/// leaves a write made that the next try finds.
pub async fn retry<T, F, Fut>(mut op: F) -> Result<T, OciDistributionError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, OciDistributionError>>,
{
    let mut delays = [50, 250].into_iter();
    loop {
        let r = op().await;
        let transient = match &r {
            Err(OciDistributionError::ServerError { code, .. }) => {
                (500..=599).contains(code) && *code != 501
            }
            Err(OciDistributionError::RequestError(e)) => !e.is_timeout() && !e.is_builder(),
            _ => false,
        };
        match (transient, delays.next()) {
            (true, Some(ms)) => tokio::time::sleep(Duration::from_millis(ms)).await,
            _ => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_with_and_without_ports() {
        for plain in [
            "localhost",
            "localhost:5000",
            "127.0.0.1",
            "127.3.2.1:5000",
            "[::1]",
            "[::1]:5000",
            "LOCALHOST",
        ] {
            assert!(is_loopback(plain), "{plain}");
        }
        for tls in [
            "registry.example",
            "10.0.0.1:5000",
            "[::2]:5000",
            "localhost.example",
        ] {
            assert!(!is_loopback(tls), "{tls}");
        }
    }
}
