package blockdev

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
)

// MemVolume is an in-memory Volume for frontend tests. It implements the
// same semantics as a Cairn volume (thin, zero padding, atomic
// compare-and-write) with one lock; it is not used on any data path.
type MemVolume struct {
	name string
	id   uint64
	mu   sync.Mutex
	// blocks holds written 4 KiB pages; absent pages read as zeros.
	pages   map[int64][]byte
	size    int64
	Flushes int // number of Flush calls, for tests
}

const memPage = 4096

// NewMemVolume returns an empty thin volume of size bytes.
func NewMemVolume(name string, id uint64, size int64) *MemVolume {
	return &MemVolume{name: name, id: id, size: size, pages: map[int64][]byte{}}
}

func (m *MemVolume) Name() string { return m.name }
func (m *MemVolume) ID() uint64   { return m.id }
func (m *MemVolume) Size() int64  { return m.size }
func (m *MemVolume) WWN() [16]byte {
	var w [16]byte
	h := sha256.Sum256([]byte(fmt.Sprintf("mem-%d", m.id)))
	copy(w[:], h[:])
	w[0] = 0x60 | (w[0] & 0x0f) // NAA 6
	return w
}
func (m *MemVolume) Serial() string { return fmt.Sprintf("%016x", m.id) }

// Check validates a request's range against the volume.
func Check(size, off, length int64) error {
	if off%SectorSize != 0 || length%SectorSize != 0 {
		return ErrUnaligned
	}
	if off < 0 || length < 0 || off+length > size {
		return ErrOutOfRange
	}
	return nil
}

func (m *MemVolume) read(p []byte, off int64) {
	for i := 0; i < len(p); {
		pg, po := (off+int64(i))/memPage, int((off+int64(i))%memPage)
		n := min(memPage-po, len(p)-i)
		if b, ok := m.pages[pg]; ok {
			copy(p[i:i+n], b[po:po+n])
		} else {
			clear(p[i : i+n])
		}
		i += n
	}
}

func (m *MemVolume) write(p []byte, off int64) {
	for i := 0; i < len(p); {
		pg, po := (off+int64(i))/memPage, int((off+int64(i))%memPage)
		n := min(memPage-po, len(p)-i)
		b, ok := m.pages[pg]
		if !ok {
			b = make([]byte, memPage)
			m.pages[pg] = b
		}
		copy(b[po:po+n], p[i:i+n])
		i += n
	}
}

func (m *MemVolume) ReadAt(_ context.Context, p []byte, off int64) error {
	if err := Check(m.size, off, int64(len(p))); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read(p, off)
	return nil
}

func (m *MemVolume) WriteAt(_ context.Context, p []byte, off int64, _ WriteFlags) error {
	if err := Check(m.size, off, int64(len(p))); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.write(p, off)
	return nil
}

func (m *MemVolume) Flush(context.Context) error {
	m.mu.Lock()
	m.Flushes++
	m.mu.Unlock()
	return nil
}

func (m *MemVolume) CompareAndWrite(_ context.Context, cmp, data []byte, off int64, _ WriteFlags) error {
	if len(cmp) != len(data) {
		return fmt.Errorf("compare-and-write: compare %d bytes, write %d bytes: %w", len(cmp), len(data), ErrUnaligned)
	}
	if err := Check(m.size, off, int64(len(cmp))); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := make([]byte, len(cmp))
	m.read(cur, off)
	if !bytes.Equal(cur, cmp) {
		for i := range cur {
			if cur[i] != cmp[i] {
				return &MiscompareError{Offset: int64(i)}
			}
		}
	}
	m.write(data, off)
	return nil
}

func (m *MemVolume) WriteZeroes(_ context.Context, off, length int64, _ bool) error {
	return m.Unmap(context.Background(), off, length)
}

func (m *MemVolume) WriteSame(_ context.Context, pattern []byte, off, length int64) error {
	if len(pattern) == 0 || len(pattern)%SectorSize != 0 || length%int64(len(pattern)) != 0 {
		return ErrUnaligned
	}
	if err := Check(m.size, off, length); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for o := off; o < off+length; o += int64(len(pattern)) {
		m.write(pattern, o)
	}
	return nil
}

func (m *MemVolume) Unmap(_ context.Context, off, length int64) error {
	if err := Check(m.size, off, length); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	z := make([]byte, length)
	m.write(z, off)
	for pg := (off + memPage - 1) / memPage; (pg+1)*memPage <= off+length; pg++ {
		delete(m.pages, pg)
	}
	return nil
}

func (m *MemVolume) CopyFrom(ctx context.Context, src Volume, srcOff, dstOff, length int64) error {
	if err := Check(m.size, dstOff, length); err != nil {
		return err
	}
	buf := make([]byte, length)
	if err := src.ReadAt(ctx, buf, srcOff); err != nil {
		return err
	}
	return m.WriteAt(ctx, buf, dstOff, 0)
}

func (m *MemVolume) Extents(_ context.Context, off, length int64) ([]Extent, error) {
	if err := Check(m.size, off, length); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Extent
	for o := off; o < off+length; {
		pg := o / memPage
		n := min(memPage-o%memPage, off+length-o)
		_, mapped := m.pages[pg]
		if k := len(out); k > 0 && out[k-1].Mapped == mapped {
			out[k-1].Length += n
		} else {
			out = append(out, Extent{Offset: o, Length: n, Mapped: mapped})
		}
		o += n
	}
	return out, nil
}

var _ Volume = (*MemVolume)(nil)
