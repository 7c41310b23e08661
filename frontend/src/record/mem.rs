//! Functional device memory of a recording: allocations with real contents, so that the
//! addresses, divergence and atomics a kernel records are the ones its data produce.

use std::fmt;

/// A value type kernels load, store and compute with: 4 or 8 bytes, little-endian.
pub trait Elem: Copy + Default + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// Bytes in memory.
    const BYTES: u32;
    /// Width modifier of memory opcodes (`""` for 32-bit, `".64"` for 64-bit).
    const WIDTH: &'static str;
    fn to_bits(self) -> u64;
    fn from_bits(b: u64) -> Self;
}

macro_rules! elem {
    ($t:ty, $bytes:expr, $width:expr, $to:expr, $from:expr) => {
        impl Elem for $t {
            const BYTES: u32 = $bytes;
            const WIDTH: &'static str = $width;
            #[inline]
            fn to_bits(self) -> u64 {
                $to(self)
            }
            #[inline]
            fn from_bits(b: u64) -> Self {
                $from(b)
            }
        }
    };
}

elem!(u32, 4, "", |v: u32| v as u64, |b: u64| b as u32);
elem!(i32, 4, "", |v: i32| v as u32 as u64, |b: u64| b as u32
    as i32);
elem!(f32, 4, "", |v: f32| v.to_bits() as u64, |b: u64| {
    f32::from_bits(b as u32)
});
elem!(u64, 8, ".64", |v: u64| v, |b: u64| b);
elem!(f64, 8, ".64", |v: f64| v.to_bits(), f64::from_bits);

/// A typed device array: base address and element count. Cheap to copy into kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer<T> {
    pub base: u64,
    pub len: u64,
    _t: std::marker::PhantomData<T>,
}

impl<T: Elem> Buffer<T> {
    pub(crate) fn new(base: u64, len: u64) -> Self {
        Buffer {
            base,
            len,
            _t: std::marker::PhantomData,
        }
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.len * T::BYTES as u64
    }

    /// Address of element `i`.
    pub fn addr(&self, i: u64) -> u64 {
        self.base + i * T::BYTES as u64
    }
}

struct Allocation {
    name: String,
    base: u64,
    data: Vec<u8>,
}

/// Where allocations start: a canonical user-space address like those CUDA returns (the
/// bundled vectorAdd trace allocates at 0x7fb0fc400000).
pub const HEAP_BASE: u64 = 0x7f00_0000_0000;
/// Allocation alignment (cudaMalloc aligns to at least 256 bytes; 512 keeps arrays on
/// distinct 128-byte lines and DRAM bursts).
pub const ALLOC_ALIGN: u64 = 512;

/// All allocations of a recording, non-overlapping, in address order.
#[derive(Default)]
pub struct DeviceMemory {
    allocs: Vec<Allocation>,
    next: u64,
    last_hit: usize,
}

/// An access outside every allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    pub addr: u64,
    pub bytes: u32,
}

impl fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "access of {} bytes at 0x{:x} is outside every allocation",
            self.bytes, self.addr
        )
    }
}

impl DeviceMemory {
    pub fn new() -> Self {
        DeviceMemory {
            allocs: Vec::new(),
            next: HEAP_BASE,
            last_hit: 0,
        }
    }

    /// Allocates `bytes` zeroed bytes; returns the base address.
    pub fn alloc(&mut self, name: &str, bytes: u64) -> u64 {
        let base = self.next;
        self.next = (base + bytes.max(1)).div_ceil(ALLOC_ALIGN) * ALLOC_ALIGN;
        self.allocs.push(Allocation {
            name: name.to_string(),
            base,
            data: vec![0; bytes as usize],
        });
        base
    }

    /// Name of the allocation holding `addr`, for messages.
    pub fn name_of(&self, addr: u64) -> Option<&str> {
        self.find(addr, 1).map(|i| self.allocs[i].name.as_str())
    }

    #[inline]
    fn find(&self, addr: u64, bytes: u32) -> Option<usize> {
        let hit =
            |a: &Allocation| addr >= a.base && addr + bytes as u64 <= a.base + a.data.len() as u64;
        if let Some(a) = self.allocs.get(self.last_hit) {
            if hit(a) {
                return Some(self.last_hit);
            }
        }
        let i = self
            .allocs
            .partition_point(|a| a.base + a.data.len() as u64 <= addr);
        self.allocs.get(i).filter(|a| hit(a)).map(|_| i)
    }

    fn slot(&mut self, addr: u64, bytes: u32) -> Result<&mut [u8], OutOfBounds> {
        let i = self.find(addr, bytes).ok_or(OutOfBounds { addr, bytes })?;
        self.last_hit = i;
        let a = &mut self.allocs[i];
        let off = (addr - a.base) as usize;
        Ok(&mut a.data[off..off + bytes as usize])
    }

    /// Reads `bytes` (4 or 8) little-endian bytes at `addr`.
    #[inline]
    pub fn read(&mut self, addr: u64, bytes: u32) -> Result<u64, OutOfBounds> {
        let s = self.slot(addr, bytes)?;
        let mut b = [0u8; 8];
        b[..s.len()].copy_from_slice(s);
        Ok(u64::from_le_bytes(b))
    }

    /// Writes the low `bytes` (4 or 8) bytes of `v` at `addr`.
    #[inline]
    pub fn write(&mut self, addr: u64, bytes: u32, v: u64) -> Result<(), OutOfBounds> {
        let s = self.slot(addr, bytes)?;
        let n = s.len();
        s.copy_from_slice(&v.to_le_bytes()[..n]);
        Ok(())
    }

    pub fn read_slice<T: Elem>(&mut self, buf: Buffer<T>) -> Result<Vec<T>, OutOfBounds> {
        (0..buf.len)
            .map(|i| self.read(buf.addr(i), T::BYTES).map(T::from_bits))
            .collect()
    }

    pub fn write_slice<T: Elem>(&mut self, buf: Buffer<T>, data: &[T]) -> Result<(), OutOfBounds> {
        for (i, v) in data.iter().enumerate() {
            self.write(buf.addr(i as u64), T::BYTES, v.to_bits())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_bounds_checked() {
        let mut m = DeviceMemory::new();
        let a = m.alloc("a", 100);
        let b = m.alloc("b", 8);
        assert!(a.is_multiple_of(ALLOC_ALIGN));
        assert!(b >= a + 100 && b.is_multiple_of(ALLOC_ALIGN));
        m.write(a + 96, 4, 0xdead_beef).unwrap();
        assert_eq!(m.read(a + 96, 4).unwrap(), 0xdead_beef);
        assert!(m.read(a + 98, 4).is_err(), "straddles the end of `a`");
        assert_eq!(m.name_of(b + 4), Some("b"));
        let buf: Buffer<f64> = Buffer::new(b, 1);
        m.write_slice(buf, &[2.5]).unwrap();
        assert_eq!(m.read_slice(buf).unwrap(), vec![2.5]);
    }
}
