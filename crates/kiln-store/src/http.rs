//! What the S3 and WebDAV back ends share: the HTTP client (timeouts,
//! proxies from the environment), running an operation on the store's
//! worker thread within its time limit, retrying what a server says is
//! transient, the location's `?timeout=SECONDS` option, and turning what a
//! server answered into a message that names the store and says what to do.

use std::future::Future;
use std::time::Duration;

use crate::StoreError;
use crate::worker::Worker;

/// The limit of one store operation unless the location says otherwise.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A location's options after `?`: only `timeout=SECONDS` (1..=3600).
pub(crate) fn timeout_option(query: Option<&str>, expected: &str) -> Result<Duration, String> {
    let mut timeout = DEFAULT_TIMEOUT;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "timeout" => {
                let secs: u64 = v
                    .parse()
                    .ok()
                    .filter(|s| (1..=3600).contains(s))
                    .ok_or_else(|| {
                        format!("timeout={v} is not a number of seconds from 1 to 3600; {expected}")
                    })?;
                timeout = Duration::from_secs(secs);
            }
            other => return Err(format!("unknown parameter {other:?}; {expected}")),
        }
    }
    Ok(timeout)
}

/// An HTTP client on a worker thread, for one store.
/// What an HTTP store holds: its async state (used on the worker) and its
/// client and worker. The S3 and WebDAV stores are each one of these.
pub(crate) struct Remote<I> {
    pub inner: std::sync::Arc<I>,
    pub http: Http,
}

impl<I: Send + Sync + 'static> Remote<I> {
    /// Runs an operation on the worker; its error is the store being
    /// unavailable, named by its location.
    pub(crate) fn run<T: Send + 'static, F>(
        &self,
        f: impl FnOnce(std::sync::Arc<I>) -> F,
    ) -> Result<T, StoreError>
    where
        F: std::future::Future<Output = Result<T, String>> + Send + 'static,
    {
        let fut = f(self.inner.clone());
        let location = self.http.location.clone();
        self.http.call(async move {
            fut.await
                .map_err(|detail| StoreError::Unavailable { location, detail })
        })
    }

    pub(crate) fn debug(&self, name: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(name)
            .field("location", &self.http.location)
            .finish()
    }
}

pub(crate) struct Http {
    pub client: reqwest::Client,
    worker: Worker,
    pub timeout: Duration,
    /// The store's location, for messages.
    pub location: String,
}

impl Http {
    pub(crate) fn new(location: String, timeout: Duration) -> Result<Http, StoreError> {
        crate::registry_io::install_tls_provider();
        let unavailable = |detail: String| StoreError::Unavailable {
            location: location.clone(),
            detail,
        };
        let mut b = reqwest::Client::builder()
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .timeout(timeout);
        let roots = crate::registry_io::system_roots();
        if !roots.is_empty() {
            // Parsed by rustls when read: from_der only wraps the bytes.
            b = b.tls_certs_only(
                roots
                    .iter()
                    .filter_map(|c| reqwest::Certificate::from_der(c).ok()),
            );
        }
        let env = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
        };
        for (names, https) in [
            (["HTTPS_PROXY", "https_proxy"], true),
            (["HTTP_PROXY", "http_proxy"], false),
        ] {
            if let Some(p) = env(names) {
                let proxy = if https {
                    reqwest::Proxy::https(&p)
                } else {
                    reqwest::Proxy::http(&p)
                }
                .map_err(|e| unavailable(format!("the proxy {p:?} is not a URL: {e}")))?;
                b = b.proxy(proxy.no_proxy(reqwest::NoProxy::from_env()));
            }
        }
        let client = b
            .build()
            .map_err(|e| unavailable(format!("setting up the HTTP client: {e}")))?;
        let worker = Worker::start("kiln-store-http").map_err(unavailable)?;
        Ok(Http {
            client,
            worker,
            timeout,
            location,
        })
    }

    pub(crate) fn unavailable(&self, detail: String) -> StoreError {
        StoreError::Unavailable {
            location: self.location.clone(),
            detail,
        }
    }

    /// Runs `fut` on the worker within the store's time limit.
    pub(crate) fn call<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        let timeout = self.timeout;
        match self
            .worker
            .run(async move { tokio::time::timeout(timeout, fut).await })
        {
            Some(Ok(r)) => r,
            Some(Err(_elapsed)) => Err(self.unavailable(format!(
                "the server did not finish the operation within {}s (add ?timeout=SECONDS to the location for a longer limit)",
                timeout.as_secs()
            ))),
            None => Err(self.unavailable("the HTTP client stopped unexpectedly".into())),
        }
    }
}

/// One answer: status and body (a record store's objects are small).
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Answer {
    /// The server's own words, if it sent a short text body (an S3 error
    /// `<Code>`, an nginx page title).
    pub(crate) fn says(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let pick = |open: &str, close: &str| -> Option<String> {
            let a = text.find(open)? + open.len();
            let b = text[a..].find(close)? + a;
            Some(text[a..b].trim().to_string())
        };
        pick("<Code>", "</Code>")
            .or_else(|| pick("<title>", "</title>"))
            .unwrap_or_default()
    }
}

/// Sends a request (built anew for each try: a signature carries the
/// time) and reads the answer; a request that cannot be built is `Err`. A
/// connection that fails or a 500/502/503/504 answer is tried again after
/// 100 ms and 500 ms (every request a store sends is idempotent or
/// conditional); what is left is `Err` with what happened.
pub(crate) async fn send(
    build: impl Fn() -> Result<reqwest::RequestBuilder, String>,
    what: &str,
) -> Result<Answer, String> {
    let mut delays = [100u64, 500].into_iter();
    loop {
        let r = match build()?.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match resp.bytes().await {
                    Ok(body) => Ok(Answer {
                        status,
                        body: body.to_vec(),
                    }),
                    Err(e) => Err(describe(&e, what)),
                }
            }
            Err(e) => Err(describe(&e, what)),
        };
        let transient = match &r {
            Ok(a) => matches!(a.status, 500 | 502 | 503 | 504),
            Err(_) => true,
        };
        match (transient, delays.next()) {
            (true, Some(ms)) => tokio::time::sleep(Duration::from_millis(ms)).await,
            _ => {
                return r;
            }
        }
    }
}

/// A transport failure in words.
fn describe(e: &reqwest::Error, what: &str) -> String {
    let chain = kiln_util::error_chain(e);
    if e.is_timeout() {
        format!("{what}: the server did not answer in time ({chain})")
    } else if e.is_connect() {
        format!("{what}: cannot connect to the server ({chain})")
    } else {
        format!("{what}: the request failed ({chain})")
    }
}

/// An answer that is not what the protocol expects, as a message: what was
/// asked, what the server said, and what to do about it.
pub(crate) fn unexpected(a: &Answer, what: &str, credentials: &str) -> String {
    let says = a.says();
    let says = if says.is_empty() {
        String::new()
    } else {
        format!(" ({says})")
    };
    let todo = match a.status {
        401 => format!(": the server wants credentials, or refused these; {credentials}"),
        403 => format!(
            ": these credentials may not do this here (a read-only key or bucket?); {credentials}"
        ),
        404 => ": the bucket or collection does not exist; create it, or check the location"
            .to_string(),
        500..=599 => ": the server failed; try again later, or ask its operator".to_string(),
        _ => String::new(),
    };
    format!("{what}: the server answered {}{says}{todo}", a.status)
}
