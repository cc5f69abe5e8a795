//! Matrix products through the `gemm` crate (candle's own kernels) on slices, with the
//! bounds checked before the unchecked call: strided matrix views ([`Mat`]), a safe
//! entry point into a borrowed buffer ([`gemm`]), and, for products that several threads
//! write into one buffer at once, [`Out`] and [`gemm_into`] (unsafe only for that sharing).
//!
//! The arguments reach `gemm::gemm` as the callers passed them before (the same shapes,
//! strides, `alpha`, `beta` and parallelism), so the products are the same to the bit.

/// A matrix in a slice of f32: element `(i, j)` at `off + i·rs + j·cs`.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    pub(crate) data: &'a [f32],
    off: usize,
    rows: usize,
    pub(crate) cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    /// `rows × cols` at `off` with strides `(rs, cs)`; an error when it reaches past `data`.
    pub(crate) fn new(
        data: &'a [f32],
        off: usize,
        (rows, cols): (usize, usize),
        (rs, cs): (usize, usize),
    ) -> candle_core::Result<Self> {
        let m = Mat {
            data,
            off,
            rows,
            cols,
            rs,
            cs,
        };
        if m.end() > data.len() {
            candle_core::bail!(
                "matrix {rows}×{cols} at {off} (strides {rs}, {cs}) outside {} floats",
                data.len()
            )
        }
        Ok(m)
    }

    /// Row-major `rows × cols` at the start of `data`.
    pub(crate) fn rows(data: &'a [f32], rows: usize, cols: usize) -> candle_core::Result<Self> {
        Self::new(data, 0, (rows, cols), (cols, 1))
    }

    /// One past the last element it reaches (0 for an empty matrix).
    fn end(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            return 0;
        }
        self.off + (self.rows - 1) * self.rs + (self.cols - 1) * self.cs + 1
    }

    /// The transpose (the same elements, strides swapped).
    pub(crate) fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
            ..self
        }
    }
}

/// Where a product is written: `rows × cols` at `off` with row stride `rs` (column
/// stride 1) in a buffer of `len` floats that several threads may write at once, each
/// to its own elements.
#[derive(Clone, Copy)]
pub(crate) struct Out {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: `Out` is a pointer into a buffer that outlives every task using it; the
// functions that write through it require the regions written by different threads to be
// disjoint (see `gemm_into`).
unsafe impl Send for Out {}
// SAFETY: as for `Send`: shared between the tasks of one product, each writing only its own
// disjoint region (the callers of `gemm_into` guarantee it).
unsafe impl Sync for Out {}

impl Out {
    /// All of `buf`.
    pub(crate) fn new(buf: &mut [f32]) -> Self {
        Out {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// The spare capacity of the empty vector `v` (`len` floats), to be written before
    /// `v.set_len(len)`.
    pub(crate) fn spare(v: &mut Vec<f32>, len: usize) -> Self {
        assert!(v.is_empty() && v.capacity() >= len);
        Out {
            ptr: v.as_mut_ptr(),
            len,
        }
    }

    /// Floats `off..off + len` of the buffer, as a slice (panics outside it).
    ///
    /// # Safety
    /// They are initialised, the buffer outlives `'a`, and no other thread reads or writes
    /// them while the slice lives.
    pub(crate) unsafe fn slice_mut<'a>(self, off: usize, len: usize) -> &'a mut [f32] {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len));
        // SAFETY: inside the buffer (checked above); the rest is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}

/// `dst = scale · a·b` (or `dst += scale · a·b` when `accumulate`), `dst` being
/// `a.rows × b.cols` at `off` in `out` with row stride `rs`.
///
/// # Safety
/// No other thread may read or write the elements of `out` this call writes while it
/// runs, and `out`'s buffer must stay alive for the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_into(
    out: Out,
    off: usize,
    rs: usize,
    a: Mat,
    b: Mat,
    accumulate: bool,
    scale: f32,
    parallel: bool,
) -> candle_core::Result<()> {
    let parallelism = match rayon::current_num_threads() {
        t if parallel && t > 1 => ::gemm::Parallelism::Rayon(t),
        _ => ::gemm::Parallelism::None,
    };
    // SAFETY: the caller's promise.
    unsafe { product_into(out, off, rs, a, b, accumulate, 1.0, scale, parallelism) }
}

/// `dst = beta · a·b` (or `dst = alpha · dst + beta · a·b` when `read_dst`), `dst` being
/// `a.rows × b.cols` at `off` of `dst` with row stride `rs`: the arguments of
/// `gemm::gemm`, checked. An error when a matrix reaches past its buffer.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm(
    dst: &mut [f32],
    off: usize,
    rs: usize,
    a: Mat,
    b: Mat,
    read_dst: bool,
    alpha: f32,
    beta: f32,
    parallelism: ::gemm::Parallelism,
) -> candle_core::Result<()> {
    // SAFETY: `dst` is borrowed mutably, so nothing else touches it during the call.
    unsafe {
        product_into(
            Out::new(dst),
            off,
            rs,
            a,
            b,
            read_dst,
            alpha,
            beta,
            parallelism,
        )
    }
}

/// The one call of `gemm::gemm`, after the bounds checks.
///
/// # Safety
/// As [`gemm_into`].
#[allow(clippy::too_many_arguments)]
unsafe fn product_into(
    out: Out,
    off: usize,
    rs: usize,
    a: Mat,
    b: Mat,
    read_dst: bool,
    alpha: f32,
    beta: f32,
    parallelism: ::gemm::Parallelism,
) -> candle_core::Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if b.rows != k {
        candle_core::bail!("product of {m}×{k} and {}×{n}", b.rows)
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let end = off + (m - 1) * rs + n;
    if end > out.len || (rs < n && m > 1) {
        candle_core::bail!(
            "product {m}×{n} at {off} (row stride {rs}) outside {} floats",
            out.len
        )
    }
    // SAFETY: every element read (a, b) or written (dst) lies inside its buffer (checked
    // above and by `Mat::new`); dst's rows do not overlap (rs ≥ n); the caller
    // guarantees no concurrent access to the written elements. With `read_dst` false
    // gemm writes dst without reading it.
    unsafe {
        ::gemm::gemm(
            m,
            n,
            k,
            out.ptr.add(off),
            1,
            rs as isize,
            read_dst,
            a.data.as_ptr().add(a.off),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr().add(b.off),
            b.cs as isize,
            b.rs as isize,
            alpha,
            beta,
            false,
            false,
            false,
            parallelism,
        );
    }
    Ok(())
}

/// `dst = scale · a·b` (or `+=`) into a whole row-major buffer, using the pool's threads.
pub(crate) fn matmul(
    dst: &mut [f32],
    a: Mat,
    b: Mat,
    accumulate: bool,
    scale: f32,
) -> candle_core::Result<()> {
    let n = b.cols;
    if dst.len() != a.rows * n {
        candle_core::bail!("product {}×{n} into {} floats", a.rows, dst.len())
    }
    // SAFETY: `dst` is borrowed mutably, so nothing else touches it.
    unsafe { gemm_into(Out::new(dst), 0, n, a, b, accumulate, scale, true) }
}

/// The product `a·b` in a new row-major buffer (not zero-filled first: gemm writes every
/// element without reading it).
pub(crate) fn product(a: Mat, b: Mat) -> candle_core::Result<Vec<f32>> {
    let n = b.cols;
    let write = |out| {
        // SAFETY: `out` is the new vector's own spare capacity, which nothing else touches.
        unsafe { gemm_into(out, 0, n, a, b, false, 1.0, true) }
    };
    // SAFETY: the product writes all a.rows × n elements (or fails, and the vector is
    // dropped unread).
    unsafe { filled(a.rows * n, write) }
}

/// A vector of `n` floats written by `write` (through the [`Out`] it gets) before anyone
/// reads them, without zero-filling it first.
///
/// # Safety
/// On `Ok`, `write` has written all `n` elements, and no writes through its `Out` remain
/// in flight.
unsafe fn filled(
    n: usize,
    write: impl FnOnce(Out) -> candle_core::Result<()>,
) -> candle_core::Result<Vec<f32>> {
    let mut v = Vec::<f32>::with_capacity(n);
    write(Out::spare(&mut v, n))?;
    // SAFETY: capacity n, every element initialised by `write` (the caller's promise).
    unsafe { v.set_len(n) };
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::testing::test_values;

    /// `a·b` from the definition, in f64.
    fn reference(a: Mat, b: Mat) -> Vec<f64> {
        let at = |m: &Mat, i: usize, j: usize| m.data[m.off + i * m.rs + j * m.cs] as f64;
        let mut out = vec![0f64; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                out[i * b.cols + j] = (0..a.cols).map(|k| at(&a, i, k) * at(&b, k, j)).sum();
            }
        }
        out
    }

    #[test]
    fn strided_products_match_the_definition_and_bounds_are_checked() {
        // 7×5 in a buffer of rows of 9 (offset 2) times the transpose of 6×5 row-major.
        let (x, y) = (test_values(7 * 9, 1), test_values(6 * 5, 2));
        let a = Mat::new(&x, 2, (7, 5), (9, 1)).unwrap();
        let b = Mat::rows(&y, 6, 5).unwrap().t();
        let want = reference(a, b);
        let mut dst = vec![f32::NAN; 3 + 7 * 8];
        gemm(
            &mut dst,
            3,
            8,
            a,
            b,
            false,
            0.0,
            1.0,
            ::gemm::Parallelism::None,
        )
        .unwrap();
        for i in 0..7 {
            for j in 0..6 {
                let got = dst[3 + i * 8 + j] as f64;
                assert!((got - want[i * 6 + j]).abs() < 1e-5, "({i}, {j})");
            }
        }
        assert_eq!(product(a, b).unwrap().len(), 42);
        // Past the buffer, a row stride shorter than a row, mismatched inner dimensions.
        assert!(Mat::new(&x, 10, (7, 5), (9, 1)).is_err());
        assert!(gemm(
            &mut dst,
            20,
            8,
            a,
            b,
            false,
            0.0,
            1.0,
            ::gemm::Parallelism::None
        )
        .is_err());
        assert!(gemm(
            &mut dst,
            0,
            4,
            a,
            b,
            false,
            0.0,
            1.0,
            ::gemm::Parallelism::None
        )
        .is_err());
        assert!(gemm(
            &mut dst,
            0,
            8,
            a,
            a,
            false,
            0.0,
            1.0,
            ::gemm::Parallelism::None
        )
        .is_err());
    }
}
