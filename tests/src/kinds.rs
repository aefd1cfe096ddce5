//! The lock kinds, listed once for every test: [`lock_kinds!`](crate::lock_kinds) is the list, and
//! everything that runs or names "every kind" is built on it: the emulator's
//! [`KINDS`](crate::redisson::KINDS), the torture fleet's
//! [`FleetKind`](crate::history::fleet::FleetKind), and the matrices of tests made by
//! [`kind_matrix!`](crate::kind_matrix) (the fault scenarios' `<scenario>::<kind>`, the interop
//! scenarios' `every_kind!`). `tests/tests/kind_lists.rs` reads the library's `kind` module and
//! fails when a kind of it is missing here, or from the lists still written out by hand (the CLI's
//! `--kind`, the lost-reply cases).
//!
//! A new kind: its emulator module in `redisson/` (its [`ObjectKind`](crate::redisson::ObjectKind)
//! impl), one line in [`lock_kinds!`](crate::lock_kinds), and then, for each scenario that does
//! not apply to it, a `skip` with the reason in that scenario's matrix.

/// The lock kinds: one row a kind, `name: Variant(object)`.
///
/// - `name` is the kind's name in test names (`<scenario>::<name>`, which `scripts/soak.sh`
///   selects by) and in the lost-reply cases (`<name>.<script>`);
/// - `Variant` is its variant of [`FleetKind`](crate::history::fleet::FleetKind) (the `--kind` of
///   `rlock-torture`, spelled as clap spells it) and of the CLI's `--kind`;
/// - `object` is its [`ObjectKind`](crate::redisson::ObjectKind) in the emulator, named after the
///   library's kind: `<Kind>Kind` for `rlock_redisson::kind::<Kind>`.
///
/// `lock_kinds!(all callback)` calls `callback! { row, row, ... }` once with every row;
/// `lock_kinds!(each callback)` calls `callback! { row }` once a row.
#[macro_export]
macro_rules! lock_kinds {
    (all $then:ident) => {
        $crate::lock_kinds! { @rows [$then] }
    };
    (each $then:ident) => {
        $crate::lock_kinds! { @rows [$crate::__each_kind] $then }
    };
    (@rows [$($then:tt)+] $($args:tt)*) => {
        $($then)+! { $($args)*
            lock: Lock($crate::redisson::ReentrantKind),
            fair: Fair($crate::redisson::FairKind),
            spin: Spin($crate::redisson::SpinKind),
            fenced: Fenced($crate::redisson::FencedKind),
            read: Read($crate::redisson::ReadKind),
            write: Write($crate::redisson::WriteKind),
            non_reentrant: NonReentrant($crate::redisson::NonReentrantKind),
            non_reentrant_fair: NonReentrantFair($crate::redisson::NonReentrantFairKind),
        }
    };
}

/// `lock_kinds!(each ...)`: the rows one by one.
#[doc(hidden)]
#[macro_export]
macro_rules! __each_kind {
    ($then:ident $($name:ident: $variant:ident($object:path)),+ $(,)?) => {
        $($then! { $name: $variant($object) })+
    };
}

/// A scenario run once per kind of [`lock_kinds!`](crate::lock_kinds), as the module `$scenario`
/// with one test (or module of tests) a kind, named after it: `<scenario>::<kind>`.
///
/// ```ignore
/// kind_matrix! {
///     scenario_name => case!(args...),
///     skip { spin: "why the scenario does not apply to it", ... },
///     ignore { non_reentrant: "why the default suite leaves it out (the `#[ignore]` reason)" },
///     also { rw: Rw },
/// }
/// ```
///
/// For each kind, `case! { scenario_name (args...) [attributes] name: Variant(object) }` writes its
/// test, with `#[ignore = reason]` in the attributes of the kinds in `ignore`; a kind in `skip` gets
/// none: a scenario that does not apply to a kind says so, with the reason. `also` adds cases
/// that are no kind of the library (a fleet's mixes), as `name: Variant` without an object. The
/// sections after the case are optional, in that order.
#[macro_export]
macro_rules! kind_matrix {
    (
        $scenario:ident => $($case:tt)::+ ! $args:tt
        $(, skip { $($skip:ident: $skip_reason:literal),+ $(,)? })?
        $(, ignore { $($ignored:ident: $ignore_reason:literal),+ $(,)? })?
        $(, also { $($extra:ident: $extra_variant:ident),+ $(,)? })?
        $(,)?
    ) => {
        mod $scenario {
            $crate::__kind_matrix_cases! {
                ($) [$($case)::+] $scenario $args
                [$($($skip)+)?]
                [$($($ignored $ignore_reason)+)?]
                [$($($extra $extra_variant)+)?]
            }
        }
    };
}

/// [`kind_matrix!`](crate::kind_matrix)'s cases: a local macro that writes a case, and one whose
/// arms tell the skipped and ignored kinds by name (`$d` is a `$`, for the local macros' own
/// variables); then the cases of the kinds, and those of `also`.
#[doc(hidden)]
#[macro_export]
macro_rules! __kind_matrix_cases {
    (
        ($d:tt) [$($case:tt)+] $scenario:ident $args:tt
        [$($skip:ident)*] [$($ignored:ident $reason:literal)*] [$($extra:ident $variant:ident)*]
    ) => {
        macro_rules! __kind_case {
            ($d($d row:tt)*) => {
                $($case)+! { $scenario $args $d($d row)* }
            };
        }
        macro_rules! __kind_row {
            $( ($skip: $d($d row:tt)*) => {}; )*
            $(
                ($ignored: $d($d row:tt)*) => {
                    __kind_case! { [#[ignore = $reason]] $ignored: $d($d row)* }
                };
            )*
            ($d($d row:tt)*) => {
                __kind_case! { [] $d($d row)* }
            };
        }
        $crate::lock_kinds! { each __kind_row }
        $( __kind_case! { [] $extra: $variant } )*
    };
}
