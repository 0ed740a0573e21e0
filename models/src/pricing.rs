//! Per-profile prices and the cost of one call in micro-dollars.

use loopgate_protocol::usage::Usage;

/// USD per million tokens. Since 1 USD per million tokens is exactly 1 micro-dollar per
/// token, the cost in micro-dollars is `tokens * usd_per_mtok`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
}

impl Price {
    /// The cost of `usage`'s tokens, rounded to the nearest micro-dollar (saturating).
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let micros = usage.input_tokens as f64 * self.input_usd_per_mtok
            + usage.output_tokens as f64 * self.output_usd_per_mtok;
        if micros.is_finite() && micros > 0.0 {
            // `as` saturates at u64::MAX for huge values.
            micros.round() as u64
        } else {
            0
        }
    }
}

/// `usage` with its `cost_micros` set from `price` (left as is without a price).
pub fn priced(mut usage: Usage, price: Option<&Price>) -> Usage {
    if let Some(price) = price {
        usage.cost_micros = price.cost_micros(&usage);
    }
    usage
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_table() {
        let price = |i, o| Price {
            input_usd_per_mtok: i,
            output_usd_per_mtok: o,
        };
        let cases: Vec<(Price, u64, u64, u64)> = vec![
            // $3 / $15 per Mtok: 1000 in + 100 out = 3000 + 1500 micro-dollars.
            (price(3.0, 15.0), 1000, 100, 4500),
            (price(0.0, 0.0), 1_000_000, 1_000_000, 0),
            (price(0.15, 0.6), 10, 10, 8), // 1.5 + 6 = 7.5 -> 8
            (price(0.15, 0.6), 1, 0, 0),   // 0.15 rounds to 0
            (price(1.0, 1.0), u64::MAX, u64::MAX, u64::MAX),
        ];
        for (price, input, output, want) in cases {
            let usage = Usage::tokens(input, output);
            assert_eq!(
                price.cost_micros(&usage),
                want,
                "{price:?} {input} {output}"
            );
        }
        let usage = priced(Usage::tokens(1000, 0), Some(&price(2.0, 0.0)));
        assert_eq!(usage.cost_micros, 2000);
        assert_eq!(priced(Usage::tokens(1000, 0), None).cost_micros, 0);
    }
}
