//! Reading a request body as its JSON Schema reads it, where serde's derive differs:
//! - a struct comes only from a JSON object. serde also builds a struct from an array of its
//!   fields in order (`{"budget": [3]}` as `{"budget": {"max_rounds": 3}}`), which the
//!   documented schema refuses; [`Strict`] refuses it too, at any depth;
//! - an integer also comes from a number with a zero fraction (`3.0`), which is an `integer`
//!   to JSON Schema; serde reads integers from integer tokens only.
//!
//! Nothing else changes.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess};
use serde::de::{VariantAccess, Visitor};

/// A deserializer that reads structs only from maps and passes everything else through.
pub(crate) struct Strict<D>(pub D);

macro_rules! forward_deserialize {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(StrictVisitor::new(visitor))
        }
    )*};
}

/// The integer methods: a whole number written with a fraction reads as the integer.
macro_rules! forward_deserialize_integer {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(StrictVisitor::integer(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize_integer!(
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
    );

    forward_deserialize!(
        deserialize_any,
        deserialize_bool,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_unit_struct(name, StrictVisitor::new(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_newtype_struct(name, StrictVisitor::new(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, StrictVisitor::new(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_tuple_struct(name, len, StrictVisitor::new(visitor))
    }

    /// The one change: a struct is read as a map, so an array is refused.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(StrictVisitor::new(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0
            .deserialize_enum(name, variants, StrictVisitor::new(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

struct StrictVisitor<V> {
    visitor: V,
    /// The value is an integer: a whole number with a fraction reads as one.
    integer: bool,
}

impl<V> StrictVisitor<V> {
    fn new(visitor: V) -> Self {
        StrictVisitor {
            visitor,
            integer: false,
        }
    }

    fn integer(visitor: V) -> Self {
        StrictVisitor {
            visitor,
            integer: true,
        }
    }
}

/// `v` as an integer when it is a whole number in the range of `u64` or `i64`.
enum Whole {
    Unsigned(u64),
    Signed(i64),
}

fn whole(v: f64) -> Option<Whole> {
    // 2^64 and -2^63 are exact in f64; every whole f64 between them converts exactly.
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    const MINUS_TWO_POW_63: f64 = -9_223_372_036_854_775_808.0;
    if !v.is_finite() || v.fract() != 0.0 {
        None
    } else if (0.0..TWO_POW_64).contains(&v) {
        Some(Whole::Unsigned(v as u64))
    } else if (MINUS_TWO_POW_63..0.0).contains(&v) {
        Some(Whole::Signed(v as i64))
    } else {
        None
    }
}

macro_rules! forward_visit {
    ($($method:ident: $ty:ty),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for StrictVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visit!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_char: char,
        visit_str: &str,
        visit_borrowed_str: &'de str,
        visit_string: String,
        visit_bytes: &[u8],
        visit_borrowed_bytes: &'de [u8],
        visit_byte_buf: Vec<u8>,
    );

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<V::Value, E> {
        match whole(v).filter(|_| self.integer) {
            Some(Whole::Unsigned(n)) => self.visitor.visit_u64(n),
            Some(Whole::Signed(n)) => self.visitor.visit_i64(n),
            None => self.visitor.visit_f64(v),
        }
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Strict(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Strict(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(StrictAccess(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(StrictAccess(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(StrictAccess(data))
    }
}

/// Seq, map, enum and variant access whose elements are read strictly.
struct StrictAccess<A>(A);

struct StrictSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Strict(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for StrictAccess<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StrictAccess<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(StrictSeed(seed))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for StrictAccess<A> {
    type Error = A::Error;
    type Variant = StrictAccess<A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        self.0
            .variant_seed(StrictSeed(seed))
            .map(|(value, variant)| (value, StrictAccess(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for StrictAccess<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(StrictSeed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, StrictVisitor::new(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, StrictVisitor::new(visitor))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use loopgate_api::{AnswerRequest, ResumeRequest, SubmitRequest};
    use serde::de::DeserializeOwned;
    use serde::Deserialize;
    use serde_json::{json, Value};

    use super::*;

    fn reads<T: DeserializeOwned>(value: &Value) -> bool {
        T::deserialize(Strict(value)).is_ok()
    }

    #[test]
    fn structs_come_only_from_objects() {
        let answer = reads::<AnswerRequest>;
        let resume = reads::<ResumeRequest>;
        let submit = reads::<SubmitRequest>;
        type Reads = fn(&Value) -> bool;
        let cases: [(Reads, Value, bool); 11] = [
            (answer, json!({"text": "yes"}), true),
            (answer, json!(["yes"]), false),
            (answer, json!({"text": "t", "x": 1}), false),
            (resume, json!({"budget": {"max_rounds": 3}}), true),
            (resume, json!({"budget": [3]}), false),
            (resume, json!({"budget": null}), true),
            (resume, json!({}), true),
            (
                submit,
                json!({"task": {"goal": "g", "roles": {"executor": ["a", "b"]}}}),
                true,
            ),
            (
                submit,
                json!({"task": {"goal": "g", "roles": ["m"]}}),
                false,
            ),
            (
                submit,
                json!({"task": {"goal": "g", "acceptance": [["a", "", "true"]]}}),
                false,
            ),
            (
                submit,
                json!({"task": {"goal": "g"}, "workspace": {"files": [["a", 420, ""]]}}),
                false,
            ),
        ];
        for (reads, value, ok) in cases {
            assert_eq!(reads(&value), ok, "{value}");
        }
    }

    #[test]
    fn whole_numbers_read_as_integers() {
        let resume = |budget: Value| reads::<ResumeRequest>(&json!({ "budget": budget }));
        let cases = [
            (json!({"start_secs": 2762.0}), true),
            (json!({"max_total_tokens": 1e19}), true),
            (json!({"max_rounds": 3.5}), false),
            (json!({"max_rounds": -1.0}), false),
            (json!({"max_rounds": 4294967296.0}), false),
            (json!({"max_total_tokens": 2e19}), false),
            (json!({"max_cost_usd": 2.0}), true),
        ];
        for (budget, ok) in cases {
            assert_eq!(resume(budget.clone()), ok, "{budget}");
        }
        let value = json!({"budget": {"start_secs": 2762.0, "max_cost_usd": 2.0}});
        let read = ResumeRequest::deserialize(Strict(&value)).unwrap();
        let budget = read.budget.unwrap();
        assert_eq!(
            (budget.start_secs, budget.max_cost_usd),
            (Some(2762), Some(2.0))
        );
    }

    #[test]
    fn everything_else_reads_as_before() {
        let value = json!({"task": {"goal": "g", "budget": {"max_cost_usd": 2.5, "max_rounds": 4},
            "acceptance": [{"id": "a", "check": "true", "timeout_secs": 9}], "threshold": 7.0},
            "workspace": {"files": [{"path": "a", "content_b64": "aGk="}]}});
        let strict = SubmitRequest::deserialize(Strict(&value)).unwrap();
        let plain: SubmitRequest = serde_json::from_value(value).unwrap();
        assert_eq!(strict, plain);
    }
}
