//! Python's `repr(float)` and the float spellings of its `json` module.

/// Python's `repr(x)` (and `str(x)`): the shortest digits that read back as `x`, in fixed notation
/// when the decimal exponent is in `-4..16` (`0.0001`, `1e+16` is the first exponent form), else
/// `d.ddde±XX` with at least two exponent digits (`1e-05`, `1.5e+300`); `-0.0`, `inf`, `-inf`,
/// `nan`.
///
/// The seeds publish scores with `str(score)`, so this is what a `.emit` message carries.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    finite_repr(x)
}

/// A float as Python's `json.dumps` writes it: [`float_repr`] for finite values, and `NaN`,
/// `Infinity`, `-Infinity` (JavaScript's names, which Python's `json` reads and writes by default)
/// for the others.
pub fn json_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    finite_repr(x)
}

fn finite_repr(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    let (digits, exp) = shortest_digits(x.abs());
    let mut out = String::with_capacity(digits.len() + 8);
    if x < 0.0 {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        // Fixed notation; `exp` is in -4..16, so both conversions below are in range.
        let point = usize::try_from(exp + 1).unwrap_or(0);
        if exp < 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n(
                '0',
                usize::try_from(-exp - 1).unwrap_or(0),
            ));
            out.push_str(&digits);
        } else if digits.len() <= point {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n('0', point - digits.len()));
            out.push_str(".0");
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.unsigned_abs()));
    }
    out
}

/// The shortest decimal digits that read back as `x` (> 0, finite) and the decimal exponent of
/// the first one, as Python's repr chooses them.
fn shortest_digits(x: f64) -> (String, i32) {
    // Rust's `{:e}` prints the shortest digits that round-trip, the ones nearest the exact value,
    // as Python does; only the layout differs, and that is rebuilt by the caller.
    let (digits, exp) = split_sci(&format!("{x:e}"));
    // When the exact value lies exactly halfway between two shortest candidates, Rust rounds up
    // and Python (David Gay's algorithm) to the even digit: 635364348477165.25 is `…165.3` in Rust
    // and `…165.2` in Python. Only an odd last digit can differ.
    let odd_last = digits
        .bytes()
        .last()
        .filter(|d| d % 2 == 1 && (digits.len() > 1 || *d > b'1'));
    let Some(last) = odd_last else {
        return (digits, exp);
    };
    let mut lower = digits[..digits.len() - 1].to_owned();
    lower.push(char::from(last - 1));
    let candidate = format!("0.{lower}e{}", exp + 1);
    if candidate.parse::<f64>() != Ok(x) {
        return (digits, exp);
    }
    // Both round-trip: a tie only if the exact value is `lower` followed by a single 5. An f64's
    // exact decimal expansion has at most 767 significant digits.
    let (exact, exact_exp) = split_sci(&format!("{x:.800e}"));
    let mut halfway = lower.clone();
    halfway.push('5');
    if exact_exp == exp && exact.trim_end_matches('0') == halfway {
        (lower, exp)
    } else {
        (digits, exp)
    }
}

/// `d.ddde±N` → (`dddd`, N).
fn split_sci(sci: &str) -> (String, i32) {
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci, "0"));
    // The exponent of an f64 is within ±324: the parse cannot fail for `{:e}` output.
    let exp: i32 = exp.parse().unwrap_or(0);
    (mantissa.chars().filter(char::is_ascii_digit).collect(), exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_and_json_differ_only_on_non_finite() {
        assert_eq!(float_repr(f64::INFINITY), "inf");
        assert_eq!(json_float(f64::INFINITY), "Infinity");
        assert_eq!(float_repr(f64::NEG_INFINITY), "-inf");
        assert_eq!(json_float(f64::NEG_INFINITY), "-Infinity");
        assert_eq!(float_repr(f64::NAN), "nan");
        assert_eq!(json_float(f64::NAN), "NaN");
        assert_eq!(float_repr(1e-5), json_float(1e-5));
        assert_eq!(float_repr(1e-5), "1e-05");
    }

    #[test]
    fn exact_ties_round_to_the_even_digit_as_python_does() {
        // Exactly 635364348477165.25: both neighbours read back, Python keeps the even one.
        let tie = f64::from_bits(0x4302_0ee2_5259_f76a);
        assert_eq!(tie * 4.0, 2_541_457_393_908_661.0, "exactly …165.25");
        assert_eq!(float_repr(tie), "635364348477165.2");
        assert_eq!(float_repr(-tie), "-635364348477165.2");
        // Not a tie: the nearer odd digit stays.
        assert_eq!(float_repr(0.3), "0.3");
        assert_eq!(float_repr(1.5), "1.5");
    }
}
