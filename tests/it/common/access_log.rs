//! What an nginx server's access log says about a test's requests: which were sent (method,
//! path, range) and how many were in flight at once. scripts/latency-server.sh logs each
//! request as `$msec $request_time $connection $body_bytes_sent "$http_range"
//! $request_method $status $uri`.

use std::path::Path;

/// The requests of one array since the log had `from` bytes.
#[derive(Debug)]
pub struct Traffic {
    /// (method, path, range) of every request.
    pub requests: Vec<(String, String, String)>,
    pub peak_in_flight: usize,
}

/// The log's length now: what a later [`traffic`] counts from.
pub fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log).map(|m| m.len()).unwrap_or(0)
}

/// The requests logged after byte `from` whose path starts with `/{prefix}`, once at least
/// `expected` are there (or 5 s have passed): nginx writes a request's line after it has
/// sent the answer, so the last lines may come a moment after the client has returned.
pub fn traffic(log: &Path, from: u64, prefix: &str, expected: usize) -> Traffic {
    let waited = std::time::Instant::now();
    loop {
        let t = traffic_now(log, from, prefix);
        if t.requests.len() >= expected || waited.elapsed() > std::time::Duration::from_secs(5) {
            return t;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn traffic_now(log: &Path, from: u64, prefix: &str) -> Traffic {
    let text = std::fs::read(log).unwrap();
    let text = String::from_utf8_lossy(&text[from as usize..]).into_owned();
    let mut spans = Vec::new();
    let mut requests = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        if parts.len() < 8 || !parts[7].starts_with(&format!("/{prefix}")) {
            continue;
        }
        let end: f64 = parts[0].parse().unwrap();
        let took: f64 = parts[1].parse().unwrap();
        // Milliseconds, nginx's own resolution.
        let (start, end) = (
            ((end - took) * 1000.0).round() as i64,
            (end * 1000.0).round() as i64,
        );
        spans.push((start, end));
        requests.push((
            parts[5].to_string(),
            parts[7].to_string(),
            parts[4].trim_matches('"').to_string(),
        ));
    }
    let mut events: Vec<(i64, i32)> = spans.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    // A request that ends in the millisecond another starts did not overlap it.
    events.sort();
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, step) in events {
        now += step;
        peak = peak.max(now);
    }
    Traffic {
        requests,
        peak_in_flight: peak as usize,
    }
}
