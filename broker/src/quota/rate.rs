//! Kafka's quota rate arithmetic, on a clock the caller passes (milliseconds), so it is
//! pure and tested with a controlled clock.
//!
//! A [`Rate`] is Kafka's `Rate` over a `SampledStat` of `quota.window.num` (11) samples of
//! `quota.window.size.seconds` (1 s): a value goes into the current sample, a new sample
//! starts once the current one is a window old, samples older than all the windows
//! together are reset, and the rate is the samples' sum over the time since the oldest
//! sample started — but never over less than `samples - 1` whole windows, so a client's
//! first burst is measured over 10 s, not over its first millisecond. The throttle time
//! for an observed rate O above a bound T over a window W is `(O - T) / T * W`
//! (`QuotaUtils.throttleTime`): the delay that brings the average back to the bound.

/// `quota.window.num`.
pub const SAMPLES: usize = 11;
/// `quota.window.size.seconds`, in ms.
pub const WINDOW_MS: u64 = 1000;

#[derive(Debug, Clone, Copy)]
struct Sample {
    start_ms: u64,
    value: f64,
}

/// One quota sensor's measurement.
#[derive(Debug, Clone)]
pub struct Rate {
    samples: Vec<Sample>,
    current: usize,
}

impl Default for Rate {
    fn default() -> Self {
        Rate {
            samples: Vec::with_capacity(SAMPLES),
            current: 0,
        }
    }
}

impl Rate {
    /// Adds `value` (may be negative: Kafka "unrecords" a throttled fetch this way).
    pub fn record(&mut self, value: f64, now_ms: u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample {
                start_ms: now_ms,
                value: 0.0,
            });
            self.current = 0;
        }
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= WINDOW_MS {
            self.current = (self.current + 1) % SAMPLES;
            let fresh = Sample {
                start_ms: now_ms,
                value: 0.0,
            };
            if self.current >= self.samples.len() {
                self.samples.push(fresh);
            } else {
                self.samples[self.current] = fresh;
            }
        }
        self.samples[self.current].value += value;
    }

    /// Resets samples older than every window together (`purgeObsoleteSamples`).
    fn purge(&mut self, now_ms: u64) {
        let expire = SAMPLES as u64 * WINDOW_MS;
        for s in &mut self.samples {
            if now_ms.saturating_sub(s.start_ms) >= expire {
                *s = Sample {
                    start_ms: now_ms,
                    value: 0.0,
                };
            }
        }
    }

    /// The window the rate is measured over, in ms (`Rate.windowSize`).
    pub fn window_ms(&mut self, now_ms: u64) -> u64 {
        self.purge(now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / WINDOW_MS;
        let min_full = SAMPLES as u64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * WINDOW_MS;
        }
        elapsed.max(1)
    }

    /// The rate per second.
    pub fn measure(&mut self, now_ms: u64) -> f64 {
        let window = self.window_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (window as f64 / 1000.0)
    }

    /// Records `value`, then the throttle time in ms if the rate now exceeds `bound`
    /// (Kafka's `Sensor.record` with its quota check, then `QuotaUtils.throttleTime`).
    pub fn record_and_throttle_ms(&mut self, value: f64, bound: f64, now_ms: u64) -> u64 {
        self.record(value, now_ms);
        let observed = self.measure(now_ms);
        if observed <= bound {
            return 0;
        }
        throttle_time_ms(observed, bound, self.window_ms(now_ms))
    }
}

/// `QuotaUtils.throttleTime`: `(observed - bound) / bound * window`, rounded.
pub fn throttle_time_ms(observed: f64, bound: f64, window_ms: u64) -> u64 {
    let ms = (observed - bound) / bound * window_ms as f64;
    if ms.is_finite() && ms > 0.0 {
        // Bounded: a rate this far over is still at most the f64 → u64 saturation.
        ms.round() as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_burst_is_measured_over_ten_windows() {
        let mut rate = Rate::default();
        rate.record(10_000.0, 5_000);
        assert_eq!(rate.window_ms(5_000), 10_000);
        assert!((rate.measure(5_000) - 1_000.0).abs() < 1e-9);
        // Half a second on, still ten windows' worth (0 full windows elapsed).
        assert!((rate.measure(5_500) - 10_000.0 / 10.5).abs() < 1e-9);
    }

    #[test]
    fn the_rate_over_a_full_window_is_the_sum_over_the_elapsed_time() {
        let mut rate = Rate::default();
        // 1,000 bytes every 100 ms for 20 s: 10,000 B/s.
        for step in 0..200u64 {
            rate.record(1_000.0, step * 100);
        }
        let now = 19_900;
        let window = rate.window_ms(now);
        assert!((10_000..=11_000).contains(&window), "window {window}");
        let measured = rate.measure(now);
        assert!((measured - 10_000.0).abs() < 500.0, "measured {measured}");
    }

    #[test]
    fn samples_older_than_all_windows_are_forgotten() {
        let mut rate = Rate::default();
        rate.record(1_000_000.0, 0);
        assert!(rate.measure(10_999) > 0.0);
        assert_eq!(rate.measure(11_000), 0.0);
    }

    #[test]
    fn throttle_brings_the_average_back_to_the_bound() {
        // 2 MB/s observed against 1 MB/s over 10 s: wait another 10 s.
        assert_eq!(throttle_time_ms(2_000_000.0, 1_000_000.0, 10_000), 10_000);
        assert_eq!(throttle_time_ms(1_100_000.0, 1_000_000.0, 11_000), 1_100);
        assert_eq!(throttle_time_ms(900.0, 1_000.0, 11_000), 0);
        let mut rate = Rate::default();
        assert_eq!(rate.record_and_throttle_ms(5_000.0, 1_000.0, 0), 0);
        // 15,000 over 10.1 s against 1,000/s: (O - T) / T * W = 15 s - 10.1 s, the
        // time at which 15,000 bytes average 1,000/s.
        assert_eq!(rate.record_and_throttle_ms(10_000.0, 1_000.0, 100), 4_900);
    }

    #[test]
    fn an_unrecorded_value_leaves_the_rate_as_it_was() {
        let mut rate = Rate::default();
        rate.record(4_000.0, 0);
        rate.record(6_000.0, 1_200);
        rate.record(-6_000.0, 1_200);
        // 4,000 over 1.2 s elapsed, padded to 10 whole windows: 10.2 s.
        assert!((rate.measure(1_200) - 4_000.0 / 10.2).abs() < 1e-9);
    }
}
