//! A growing array in fixed-size chunks, for the runtimes' per-operation arrays (issue 13: bytes
//! per primal op at 10^6). A `Vec` that doubles holds up to twice what it needs, and while it
//! grows, the old and the new buffer at once (three times): `dualrev/contrib`'s edge arrays on
//! horner at 10^6 ended in a capacity of 2^23 for 6·10^6 edges. Chunks never move and the last one
//! is the only one not full, so the overshoot is less than one chunk (the first chunk grows as a
//! `Vec`, so that a small run holds no more than a `Vec` would).

/// Elements per chunk: 2^16 (512 KiB of `f64`), small beside a run that needs chunks at all.
const BITS: u32 = 16;
const CHUNK: usize = 1 << BITS;

#[derive(Debug, Default)]
pub struct Chunked<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T: Copy> Chunked<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Appends `x`: in place while the last chunk has room (inlined: `dualrev/contrib`'s compiled
    /// rounds push four elements a Contrib edge), else `grow`.
    #[inline]
    pub fn push(&mut self, x: T) {
        if let Some(c) = self.chunks.last_mut() {
            if c.len() < c.capacity() && c.len() < CHUNK {
                c.push(x);
                self.len += 1;
                return;
            }
        }
        self.grow(x);
    }
    #[cold]
    #[inline(never)]
    fn grow(&mut self, x: T) {
        // the first chunk grows as a `Vec` does (a small run holds no more than it would), the
        // others are made whole; every chunk but the last holds exactly `CHUNK`
        let first = self.chunks.len() == 1;
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK && (first || c.len() < c.capacity()) => c.push(x),
            _ => {
                let mut c = Vec::with_capacity(if self.chunks.is_empty() { 0 } else { CHUNK });
                c.push(x);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }
    /// The elements at once when they fit the last chunk as `push` would put them (the Delta arena
    /// appends a node's words so, issue 13: a word at a time, each a call, was 10 % of
    /// krawiec/array's run), else one by one: the chunks end the same either way. Always inlined:
    /// out of line, the call was a third of a node's push in a compiled round (issue 13, session 40).
    #[inline(always)]
    pub fn extend_from_slice(&mut self, xs: &[T]) {
        let first = self.chunks.len() == 1;
        if let Some(c) = self.chunks.last_mut() {
            let n = c.len() + xs.len();
            if n <= CHUNK && (first || n <= c.capacity()) {
                // (element by element: `Vec::extend_from_slice` calls memcpy for a node's 2–3 words)
                for &x in xs {
                    c.push(x);
                }
                self.len += xs.len();
                return;
            }
        }
        for &x in xs {
            self.push(x);
        }
    }
    /// Appends `xs` as `push` would one by one (the chunks end the same), a chunk's part at once
    /// (a batch of compiled rounds' Delta words, issue 13). The first chunk grows as a `Vec` does,
    /// by doubling, never past `CHUNK`.
    pub fn extend_bulk(&mut self, mut xs: &[T]) {
        while let Some(&x0) = xs.first() {
            let first = self.chunks.len() == 1;
            match self.chunks.last_mut() {
                Some(c) if c.len() < CHUNK && (first || c.len() < c.capacity()) => {
                    let end = if first { CHUNK } else { c.capacity().min(CHUNK) };
                    let k = (end - c.len()).min(xs.len());
                    if first && c.len() + k > c.capacity() {
                        let want = (2 * c.capacity()).max(c.len() + k).max(4).min(CHUNK);
                        c.reserve_exact(want - c.len());
                    }
                    c.extend_from_slice(&xs[..k]);
                    self.len += k;
                    xs = &xs[k..];
                }
                _ => {
                    self.grow(x0);
                    xs = &xs[1..];
                }
            }
        }
    }
    /// The last chunk, taken out to be appended to by index (a batch of compiled rounds, issue 13),
    /// with room for `n` more: grown fourfold up to `CHUNK`, a new one when the last is full;
    /// `None` (nothing changed) when the `n` would cross into a next chunk. Until `put_last`, the
    /// array is its other chunks.
    pub fn take_last(&mut self, n: usize) -> Option<Vec<T>> {
        if n > CHUNK {
            return None;
        }
        let full = self.chunks.last().is_none_or(|c| c.len() == CHUNK);
        let mut c = if full { Vec::with_capacity(if self.chunks.is_empty() { 0 } else { CHUNK }) } else { self.chunks.pop()? };
        let len = c.len();
        if len + n > CHUNK {
            self.chunks.push(c);
            return None;
        }
        if c.capacity() < len + n {
            c.reserve_exact((4 * len).max(len + n).min(CHUNK) - len);
        }
        self.len -= len;
        Some(c)
    }
    /// The chunk `take_last` took, back as the last (appended to, at most to `CHUNK`).
    pub fn put_last(&mut self, c: Vec<T>) {
        self.len += c.len();
        self.chunks.push(c);
    }
    /// The first `n` elements kept (no change when there are no more): the chunks as the pushes of
    /// those alone left them (a batch of compiled rounds that cannot finish, issue 13).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len {
            return;
        }
        let keep = n.div_ceil(CHUNK);
        self.chunks.truncate(keep);
        if let Some(c) = self.chunks.last_mut() {
            c.truncate(n - (keep - 1) * CHUNK);
        }
        self.len = n;
    }
    /// The element pushed last.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.chunks.last_mut()?.last_mut()
    }
    /// The `n` elements from `i` when they are in one chunk (`None` if not, or past the end).
    #[inline]
    pub fn slice(&self, i: usize, n: usize) -> Option<&[T]> {
        let at = i & (CHUNK - 1);
        self.chunks.get(i >> BITS)?.get(at..at + n)
    }
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        self.chunks.get(i >> BITS)?.get(i & (CHUNK - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `extend_bulk` leaves what `push` one by one leaves: the elements, and chunks of `CHUNK`
    /// but the last (the first grown up to `CHUNK`, not past it), whatever the slices' lengths.
    /// Fails if a slice crossing a chunk's end is put wholly in one chunk.
    #[test]
    fn a_bulk_extend_is_pushes_one_by_one() {
        let (mut a, mut b) = (Chunked::default(), Chunked::default());
        let mut x = 0u32;
        for n in [0usize, 1, 3, 1000, CHUNK - 500, 7, 2 * CHUNK + 5, 1] {
            let xs: Vec<u32> = (x..x + n as u32).collect();
            x += n as u32;
            a.extend_bulk(&xs);
            for &v in &xs {
                b.push(v);
            }
            assert_eq!(a.len(), b.len());
            assert_eq!(a.chunks.iter().map(|c| c.len()).collect::<Vec<_>>(), b.chunks.iter().map(|c| c.len()).collect::<Vec<_>>());
            assert!(a.chunks.iter().all(|c| c.capacity() <= CHUNK));
        }
        assert!((0..b.len()).all(|i| a.get(i) == b.get(i)));
    }

    /// `take_last` hands over the last chunk with room for `n` (the first grown fourfold, never
    /// past `CHUNK`), a new one once the last is full, and nothing when `n` would cross a chunk's
    /// end; appended to and put back, the elements are where `push` would have put them.
    #[test]
    fn a_taken_last_chunk_is_appended_to_as_push_would() {
        let mut a = Chunked::default();
        let mut c = a.take_last(3).unwrap();
        assert!(c.is_empty() && c.capacity() >= 3);
        c.extend([0u32, 1, 2]);
        a.put_last(c);
        assert_eq!((a.len(), a.get(2)), (3, Some(&2)));
        let c = a.take_last(CHUNK - 3).unwrap();
        assert!(c.capacity() <= CHUNK, "room {}", c.capacity());
        a.put_last(c);
        assert_eq!(a.len(), 3);
        // would cross the first chunk's end: nothing taken
        assert!(a.take_last(CHUNK - 2).is_none());
        assert_eq!((a.len(), a.get(1)), (3, Some(&1)));
        for i in 3..CHUNK as u32 {
            a.push(i);
        }
        // the first is full: a new chunk of its own
        let mut c = a.take_last(2).unwrap();
        assert!(c.is_empty() && c.capacity() == CHUNK);
        c.extend([7, 8]);
        a.put_last(c);
        a.push(9);
        assert_eq!(a.len(), CHUNK + 3);
        assert_eq!([a.get(CHUNK - 1), a.get(CHUNK), a.get(CHUNK + 2)], [Some(&(CHUNK as u32 - 1)), Some(&7), Some(&9)]);
        assert_eq!(a.slice(CHUNK, 3), Some(&[7, 8, 9][..]));
    }

    /// Cut back (inside a chunk, at a chunk's end, to nothing) and pushed to again, the array is
    /// element for element and chunk for chunk the one the pushes alone make: fails if `truncate`
    /// kept a chunk past the cut or miscounted `len`.
    #[test]
    fn truncated_then_pushed_is_as_pushed_alone() {
        for cut in [0, 5, CHUNK - 1, CHUNK, CHUNK + 3, 2 * CHUNK] {
            let mut a = Chunked::default();
            for i in 0..2 * CHUNK + 9 {
                a.push(i as u32);
            }
            a.truncate(cut);
            assert_eq!(a.len(), cut);
            let mut b = Chunked::default();
            for i in 0..cut {
                b.push(i as u32);
            }
            for i in 0..CHUNK + 2 {
                a.push(7 + i as u32);
                b.push(7 + i as u32);
            }
            assert_eq!(a.len(), b.len(), "{cut}");
            assert!((0..a.len()).all(|i| a.get(i) == b.get(i)), "{cut}");
            assert_eq!(a.chunks.iter().map(Vec::len).collect::<Vec<_>>(), b.chunks.iter().map(Vec::len).collect::<Vec<_>>(), "{cut}");
            assert!(a.chunks.iter().all(|c| c.len() <= CHUNK));
        }
    }

    #[test]
    fn elements_are_where_they_were_pushed_across_chunks() {
        let mut a = Chunked::default();
        let n = 3 * CHUNK + 5;
        for i in 0..n {
            a.push(i as u32);
        }
        a.extend_from_slice(&[7, 8]);
        assert_eq!(a.len(), n + 2);
        assert_eq!(a.get(CHUNK - 1), Some(&(CHUNK as u32 - 1)));
        assert_eq!(a.get(CHUNK), Some(&(CHUNK as u32)));
        assert_eq!(a.get(n), Some(&7));
        assert_eq!(a.get(n + 1), Some(&8));
        assert_eq!(a.get(n + 2), None);
        assert_eq!(a.chunks.iter().map(Vec::len).sum::<usize>(), n + 2);
        // every chunk but the last is full, and none grew past its one allocation
        assert!(a.chunks.iter().all(|c| c.capacity() == CHUNK));
    }

    /// Slices of 1–3 elements (a Delta node's words) land as pushes one by one would put them, in
    /// the first chunk (grown as a `Vec`) and across every chunk's end: fails if `extend_from_slice`
    /// filled a chunk past `CHUNK` or past its allocation, or lost or reordered an element.
    #[test]
    fn slices_land_as_their_elements_pushed_one_by_one() {
        let (mut bulk, mut one) = (Chunked::default(), Chunked::default());
        let mut k = 0u32;
        while bulk.len() < 3 * CHUNK + 7 {
            let n = (k % 3 + 1) as usize;
            let xs: Vec<u32> = (k..k + n as u32).collect();
            bulk.extend_from_slice(&xs);
            for &x in &xs {
                one.push(x);
            }
            k += n as u32;
        }
        assert_eq!(bulk.len(), one.len());
        assert_eq!(bulk.chunks.iter().map(Vec::len).collect::<Vec<_>>(), one.chunks.iter().map(Vec::len).collect::<Vec<_>>());
        assert!(bulk.chunks.iter().all(|c| c.len() <= CHUNK));
        assert!(bulk.chunks[1..].iter().all(|c| c.capacity() == CHUNK));
        assert!((0..bulk.len()).all(|i| bulk.get(i) == Some(&(i as u32))));
    }
}
