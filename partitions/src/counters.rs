//! How a unit declares its counters: [`unit_counters!`] makes a struct of plain `u64`
//! counters with `add`, serializable (the [`crate::stats::StatsPart`] an MPI rank sends).

/// Declares a struct of `u64` counters beside its unit, with `add` (the merge of units in
/// unit-id order). A unit bumps its fields directly: no dispatch on the hot path.
macro_rules! unit_counters {
    ($(#[$m:meta])* pub struct $name:ident { $( $(#[$doc:meta])* $field:ident ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        pub struct $name {
            $( $(#[$doc])* pub $field: u64, )*
        }

        impl $name {
            /// Adds every counter of `o`.
            pub fn add(&mut self, o: &$name) {
                $( self.$field += o.$field; )*
            }

            /// What every counter grew by since `base` (counters only grow).
            pub fn since(&self, base: &$name) -> $name {
                $name { $( $field: self.$field.saturating_sub(base.$field), )* }
            }
        }
    };
}

pub(crate) use unit_counters;
