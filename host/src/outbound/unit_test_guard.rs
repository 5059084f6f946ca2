//! Unit tests never leave the machine: in unit-test builds every HTTP client of the
//! host refuses a non-loopback address before anything is resolved or connected.

#[cfg(test)]
use std::net::IpAddr;

#[cfg(test)]
use reqwest::Url;

/// A request to anything but a loopback address ends the test binary at once, naming the
/// address (a panic could be caught by the code under test and read as an unreachable
/// node). The proxy hook runs before any name is resolved or connected.
#[cfg(test)]
pub(super) fn loopback_only(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder.proxy(reqwest::Proxy::custom(|url| {
        if !is_loopback_url(url) {
            eprintln!("a unit test tried to reach {url}: unit tests may reach 127.0.0.1 only");
            std::process::abort();
        }
        None::<Url>
    }))
}

/// Outside unit tests, the client as it is.
#[cfg(not(test))]
pub(super) fn loopback_only(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    builder
}

#[cfg(test)]
fn is_loopback_url(url: &Url) -> bool {
    let host = url
        .host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host == "localhost" || host.ends_with(".localhost"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Run alone by the test below (with the variable set): reaches a documentation
    /// address that no network routes. Without the variable it does nothing.
    #[tokio::test]
    async fn reach_outside_the_machine_when_asked() {
        if std::env::var_os("AGENT_HOST_REACH_OUTSIDE").is_none() {
            return;
        }
        let _ = super::super::operator_client(Some(Duration::from_secs(1)))
            .get("http://192.0.2.1/")
            .send()
            .await;
    }

    /// No unit test may open a connection outside 127.0.0.1: one that tries ends the whole
    /// test binary before anything is resolved or connected, naming the address.
    #[test]
    fn a_unit_test_that_reaches_outside_the_machine_fails_the_run() {
        let run = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "outbound::unit_test_guard::tests::reach_outside_the_machine_when_asked",
                "--nocapture",
            ])
            .env("AGENT_HOST_REACH_OUTSIDE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success(), "the run passed: {stderr}");
        assert!(
            stderr.contains("a unit test tried to reach http://192.0.2.1/"),
            "{stderr}"
        );
        for allowed in [
            "http://127.0.0.1:9/",
            "http://[::1]:8080/x",
            "http://localhost/",
            "http://a.localhost/",
        ] {
            assert!(is_loopback_url(&Url::parse(allowed).unwrap()), "{allowed}");
        }
        for outside in [
            "http://192.0.2.1/",
            "https://mainnet.base.org/",
            "http://localhost.example/",
        ] {
            assert!(!is_loopback_url(&Url::parse(outside).unwrap()), "{outside}");
        }
    }
}
