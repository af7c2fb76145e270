//! One headless Chromium for the whole test binary, driven over WebDriver (chromedriver) with
//! fantoccini. Missing Chromium fails with the install command, never skips.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::common::{Http, PATIENCE};

/// Where Debian's `chromium` and `chromium-driver` packages put them.
const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The two widths every page is checked and photographed at.
pub const WIDTHS: [(u32, u32); 2] = [(1280, 900), (390, 844)];

pub struct Browser {
    pub client: Client,
    driver: Child,
    driver_http: Http,
    session: String,
    shots: PathBuf,
}

fn missing(what: &str, path: &str) -> ! {
    panic!(
        "{what} is not installed at {path}: the console tests drive a real headless Chromium. \
         Install it with `apt-get install -y chromium chromium-driver` (`.ci/run` does this)"
    )
}

impl Browser {
    pub async fn start() -> Browser {
        if !std::path::Path::new(CHROMIUM).exists() {
            missing("Chromium", CHROMIUM);
        }
        if !std::path::Path::new(CHROMEDRIVER).exists() {
            missing("chromedriver", CHROMEDRIVER);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let driver_http = Http::new(&url);
        let deadline = Instant::now() + PATIENCE;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let caps = json!({
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         "--disable-extensions", "--window-size=1280,900"],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .expect("a Chromium session");
        let session = client
            .session_id()
            .await
            .expect("session id")
            .expect("a session");
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("the target directory")
            .join("ui-screenshots");
        std::fs::create_dir_all(&shots).expect("create target/ui-screenshots");
        Browser {
            client,
            driver,
            driver_http,
            session,
            shots,
        }
    }

    /// Ends the session (Chromium exits) and chromedriver.
    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }

    /// Back to one blank window at the wide size, with an empty log, for the next scenario.
    pub async fn reset(&self) {
        let windows = self.client.windows().await.expect("windows");
        for extra in windows.iter().skip(1) {
            self.client
                .switch_to_window(extra.clone())
                .await
                .expect("switch");
            self.client.close_window().await.expect("close window");
        }
        if let Some(first) = windows.into_iter().next() {
            self.client.switch_to_window(first).await.expect("switch");
        }
        // The last scenario's page still polls its gateway, which ended with the scenario: left
        // open, its refused requests would land in the next scenario's log. A blank page stops
        // them, and the drain below takes any logged before it.
        self.goto("about:blank").await;
        self.set_width(WIDTHS[0]).await;
        self.console_errors().await;
    }

    pub async fn set_width(&self, (w, h): (u32, u32)) {
        self.client.set_window_size(w, h).await.expect("resize");
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Waits until the element exists and its text satisfies `ok`; returns the text.
    pub async fn text_when(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PATIENCE;
        let mut last = String::from("(no element)");
        loop {
            if let Ok(el) = self.client.find(Locator::Css(css)).await
                && let Ok(text) = el.text().await
            {
                if ok(&text) {
                    return text;
                }
                last = text;
            }
            assert!(
                Instant::now() < deadline,
                "{css} never matched; its text was {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .map(|v| v.len())
            .unwrap_or(0)
    }

    /// Saves the current page at both widths as `<name>-<width>.png`, checking at each width that
    /// nothing is wider than the window (readable without sideways scrolling).
    pub async fn screenshots(&self, name: &str) {
        for size in WIDTHS {
            self.set_width(size).await;
            let overflow = self
                .client
                .execute(
                    "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
                    vec![],
                )
                .await
                .expect("measure");
            assert!(
                overflow.as_i64().unwrap_or(1) <= 0,
                "{name} at {} px scrolls sideways by {overflow} px",
                size.0
            );
            let png = self.client.screenshot().await.expect("screenshot");
            let path = self.shots.join(format!("{name}-{}.png", size.0));
            std::fs::write(&path, png).expect("write the screenshot");
        }
        self.set_width(WIDTHS[0]).await;
    }

    /// The browser's console entries at level SEVERE since the last call (it drains them).
    pub async fn console_errors(&self) -> Vec<String> {
        let resp = self
            .driver_http
            .post(
                &format!("/session/{}/se/log", self.session),
                &json!({"type": "browser"}).to_string(),
            )
            .await;
        assert_eq!(resp.code(), 200, "reading the browser log: {}", resp.text);
        resp.json()["value"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Asserts the console has no errors but the ones a scenario provokes on purpose (each
    /// `allowed` is a substring of the message).
    pub async fn assert_clean_console(&self, allowed: &[&str]) {
        let errors: Vec<String> = self
            .console_errors()
            .await
            .into_iter()
            .filter(|m| !allowed.iter().any(|a| m.contains(a)))
            .collect();
        assert!(errors.is_empty(), "console errors: {errors:#?}");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
