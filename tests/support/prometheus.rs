//! A real Prometheus (Debian's `prometheus` package) scraping a server's `/metrics` every
//! second, read back through its HTTP query API as a dashboard would.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Prometheus {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`host:port`) as job `agent-host`, and waits
    /// until it is ready.
    pub async fn scraping(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: agent-host\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        // Port 0: Prometheus binds a port of its own and names it in its log (stderr).
        let mut child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg("--web.listen-address=127.0.0.1:0")
            .arg("--log.level=info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start prometheus (scripts/test.sh installs Debian's package)");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                let (_, after) = line.split_once("msg=\"Listening on\" address=")?;
                Some(after.split_whitespace().next()?.to_string())
            })
            .expect("prometheus exited before it named its address");
        // Keep reading, so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let prometheus = Prometheus {
            child,
            base: format!("http://{address}"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = super::client().get(format!("{}/-/ready", prometheus.base)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return prometheus;
            }
            assert!(Instant::now() < deadline, "prometheus did not become ready");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The value of an instant query with one result; `None` when it has none.
    pub async fn query(&self, promql: &str) -> Option<f64> {
        let result = self.series(promql).await;
        assert!(result.len() <= 1, "{promql}: more than one series: {result:?}");
        result.first()?["value"][1].as_str()?.parse().ok()
    }

    /// The series an instant query gives (it must be valid PromQL).
    pub async fn series(&self, promql: &str) -> Vec<Value> {
        let reply: Value = super::client()
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", promql)])
            .send()
            .await
            .expect("query prometheus")
            .json()
            .await
            .expect("a JSON answer");
        assert_eq!(reply["status"], "success", "{promql}: {reply}");
        reply["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Waits (up to 20 s, some scrapes) until `promql` gives `expected`.
    pub async fn expect(&self, promql: &str, expected: f64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let value = self.query(promql).await;
            if value == Some(expected) {
                return;
            }
            assert!(Instant::now() < deadline, "{promql} is {value:?}, not {expected}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
