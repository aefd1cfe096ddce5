//! Java's encodings in Redisson's files, read the way Java writes them: objects tagged with their
//! class (`!<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}`), which serde
//! sees only once [`class_tags`] has rewritten the tags and reads as [`Tagged`] values;
//! `java.time.Duration`'s ISO-8601 text ([`java_duration`]); and the `DelayStrategy` classes of
//! `retryDelay`, mapped onto rlock's retry delays ([`retry_delays`]). Apart because each follows a
//! Java class's rules rather than YAML's or rlock's.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::de::{EnumAccess, MapAccess, VariantAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::keys::invalid;
use crate::error::Result;

/// A value Redisson writes with its Java class as a YAML tag, e.g.
/// `!<org.redisson.config.ConstantDelay> {delay: PT1S}`: the class (`None` when untagged) and the
/// value. serde_yaml_ng hands a tagged value to serde as an enum whose variant is the tag, once
/// [`class_tags`] has made the tag one it reports.
#[derive(Debug)]
pub(super) struct Tagged<T> {
    pub(super) class: Option<String>,
    pub(super) value: T,
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Tagged<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct TaggedVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for TaggedVisitor<T> {
            type Value = Tagged<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping tagged with a Java class, e.g. !<org.redisson.Class> {}")
            }

            fn visit_enum<A: EnumAccess<'de>>(
                self,
                data: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let (class, value) = data.variant::<String>()?;
                Ok(Tagged {
                    class: Some(class),
                    value: value.newtype_variant()?,
                })
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let value = T::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(Tagged { class: None, value })
            }
        }

        deserializer.deserialize_any(TaggedVisitor(PhantomData))
    }
}

/// Makes the Java classes of the file's tags visible to serde: serde_yaml_ng ignores verbatim tags
/// (`!<org.redisson.codec.Kryo5Codec>`, the form Redisson writes) and hands a value with a local
/// tag (`!name`) to serde as an enum whose variant is the name, so each verbatim tag naming a Java
/// class becomes the verbatim form of a local one, `!<!org.redisson.codec.Kryo5Codec>`.
///
/// Tags are found outside quotes and comments where a value starts; a plain (unquoted) value
/// holding ` !<` would look the same, so the file is read with and without the rewrite and must
/// say the same apart from the tags, or it is refused.
pub(super) fn class_tags(yaml: &str) -> Result<String> {
    #[derive(PartialEq)]
    enum State {
        Plain,
        Single,
        Double,
        Comment,
    }
    let bytes = yaml.as_bytes();
    let mut tagged = String::with_capacity(yaml.len() + 64);
    let mut copied = 0;
    let mut state = State::Plain;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let after_space = i == 0 || bytes[i - 1].is_ascii_whitespace();
        let starts_value = after_space || matches!(bytes[i - 1], b'[' | b'{' | b',');
        match state {
            State::Comment if byte == b'\n' => state = State::Plain,
            // `''` is a quote inside a single-quoted value.
            State::Single if byte == b'\'' => match bytes.get(i + 1) {
                Some(b'\'') => i += 1,
                _ => state = State::Plain,
            },
            State::Double if byte == b'\\' => i += 1,
            State::Double if byte == b'"' => state = State::Plain,
            State::Plain if byte == b'#' && after_space => state = State::Comment,
            State::Plain if byte == b'\'' && starts_value => state = State::Single,
            State::Plain if byte == b'"' && starts_value => state = State::Double,
            State::Plain if byte == b'!' && starts_value && bytes.get(i + 1) == Some(&b'<') => {
                let class = yaml[i + 2..].split('>').next().unwrap_or_default();
                let java = |c: char| c.is_alphanumeric() || matches!(c, '.' | '_' | '$');
                if !class.is_empty() && class.chars().all(java) && yaml[i + 2..].contains('>') {
                    tagged.push_str(&yaml[copied..i]);
                    tagged.push_str("!<!");
                    copied = i + 2;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if copied == 0 {
        return Ok(yaml.to_owned());
    }
    tagged.push_str(&yaml[copied..]);
    let value = |yaml: &str| {
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(yaml)
            .map_err(|e| invalid("Redisson config", e))
    };
    if untagged(value(&tagged)?) != untagged(value(yaml)?) {
        return Err(invalid(
            "Redisson config",
            "an unquoted value holds \" !<\", which reads like a YAML tag: quote it",
        ));
    }
    Ok(tagged)
}

/// `value` without its tags (local ones, which serde_yaml_ng keeps, included).
fn untagged(value: serde_yaml_ng::Value) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value;
    match value {
        Value::Tagged(tagged) => untagged(tagged.value),
        Value::Sequence(items) => Value::Sequence(items.into_iter().map(untagged).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(key, value)| (untagged(key), untagged(value)))
                .collect(),
        ),
        other => other,
    }
}

/// A duration as Java's `Duration.toString` writes it and `Duration.parse` reads it (ISO-8601
/// `PnDTnHnMn.nS`, e.g. `PT1S`, `PT0.1S`, `PT1M30S`, `PT-1.5S`), which Redisson's delays use. Written
/// here because Java's form allows a sign on every part, which general ISO-8601 crates reject;
/// negative totals are refused, since they are delays.
pub(super) fn java_duration(key: &str, text: &str) -> Result<Duration> {
    let bad = || {
        invalid(
            key,
            format!("{text:?} is not an ISO-8601 duration such as PT1S or PT0.5S"),
        )
    };
    let upper = text.to_ascii_uppercase();
    let (negated, rest) = match upper.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, upper.strip_prefix('+').unwrap_or(&upper)),
    };
    let rest = rest.strip_prefix('P').ok_or_else(bad)?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) if !time.is_empty() => (days, time),
        Some(_) => return Err(bad()),
        None => (rest, ""),
    };
    if days.is_empty() && time.is_empty() {
        return Err(bad());
    }
    // Nanoseconds, signed, in i128: no Duration Java can write overflows it.
    let mut total: i128 = 0;
    for (part, units) in [
        (days, &[('D', 86_400)][..]),
        (time, &[('H', 3_600), ('M', 60), ('S', 1)]),
    ] {
        let mut part = part;
        for &(unit, seconds) in units {
            let Some(end) = part.find(unit) else {
                continue;
            };
            let number = &part[..end];
            part = &part[end + 1..];
            let (whole, fraction) = match number.split_once(['.', ',']) {
                Some((whole, fraction)) if unit == 'S' => (whole, fraction),
                Some(_) => return Err(bad()),
                None => (number, ""),
            };
            let (sign, digits) = match whole.strip_prefix('-') {
                Some(digits) => (-1, digits),
                None => (1, whole.strip_prefix('+').unwrap_or(whole)),
            };
            let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
            if digits.is_empty()
                || !all_digits(digits)
                || fraction.len() > 9
                || !all_digits(fraction)
            {
                return Err(bad());
            }
            let whole: i128 = digits.parse().map_err(|_| bad())?;
            let nanos: i128 = format!("{fraction:0<9}").parse().map_err(|_| bad())?;
            total += sign * (whole * seconds * 1_000_000_000 + nanos);
        }
        if !part.is_empty() {
            return Err(bad());
        }
    }
    if negated {
        total = -total;
    }
    let nanos = u64::try_from(total).map_err(|_| {
        invalid(
            key,
            format!("{text:?}: a delay must not be negative or too long"),
        )
    })?;
    Ok(Duration::from_nanos(nanos))
}

/// The settings of Redisson's `DelayStrategy` classes (`retryDelay`), as ISO-8601 durations.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(super) struct DelayFields {
    delay: Option<String>,
    base_delay: Option<String>,
    max_delay: Option<String>,
}

/// rlock's retry delays (`retry_delay`, `retry_max_delay`) for a `retryDelay` object at `key`, or
/// `None` (with a warning) for a class rlock does not know. rlock doubles the delay from
/// `retry_delay` up to `retry_max_delay` and waits half of it plus a random part of the other
/// half: Redisson's `EqualJitterDelay`, exactly.
pub(super) fn retry_delays(
    key: &str,
    delay: &Tagged<DelayFields>,
    warnings: &mut Vec<String>,
) -> Result<Option<(Duration, Duration)>> {
    let Some(class) = delay.class.as_deref() else {
        return Err(invalid(
            key,
            "names no class: Redisson writes it as a YAML tag, e.g. \
             !<org.redisson.config.EqualJitterDelay> {baseDelay: PT1S, maxDelay: PT2S}",
        ));
    };
    let fields = &delay.value;
    let setting = |field: &str, value: &Option<String>| match value {
        Some(text) => java_duration(&format!("{key}.{field}"), text),
        None => Err(invalid(
            &format!("{key}.{field}"),
            format!("missing ({class})"),
        )),
    };
    let not_for = |field: &str, value: &Option<String>| match value {
        Some(_) => Err(invalid(
            &format!("{key}.{field}"),
            format!("not a setting of {class}"),
        )),
        None => Ok(()),
    };
    let short = class.strip_prefix("org.redisson.config.").unwrap_or(class);
    if short == "ConstantDelay" {
        not_for("baseDelay", &fields.base_delay)?;
        not_for("maxDelay", &fields.max_delay)?;
        let delay = setting("delay", &fields.delay)?;
        return Ok(Some((delay, delay)));
    }
    let differs = match short {
        "EqualJitterDelay" => None,
        "FullJitterDelay" => Some("waits a random time between 0 and the doubled delay"),
        "DecorrelatedJitterDelay" => {
            Some("waits a random time between baseDelay and three times the previous delay")
        }
        _ => {
            warnings.push(format!(
                "{key} {class} ignored: rlock reads Redisson's ConstantDelay, EqualJitterDelay, \
                 FullJitterDelay and DecorrelatedJitterDelay, and cannot run Java code; the retry \
                 delays stay retryInterval's, or rlock's defaults (1 s doubling up to 2 s)"
            ));
            return Ok(None);
        }
    };
    not_for("delay", &fields.delay)?;
    let base = setting("baseDelay", &fields.base_delay)?;
    let max = setting("maxDelay", &fields.max_delay)?;
    if let Some(differs) = differs {
        warnings.push(format!(
            "{key} {short}: {short} {differs}; rlock doubles from baseDelay up to maxDelay and \
             waits half of that plus a random part of the other half (EqualJitterDelay), with the \
             same baseDelay and maxDelay"
        ));
    }
    // Redisson caps every delay at maxDelay, a baseDelay above it included.
    Ok(Some((base.min(max), max)))
}
