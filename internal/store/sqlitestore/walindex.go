package sqlitestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// The WAL file's size says how far it once grew, not how much of it is in
// use: a checkpoint that restarts the WAL (any mode but TRUNCATE) leaves
// the file as long as it was, and new frames overwrite it from the start.
// What is in use is in the WAL index, the -shm file every connection maps:
// its header (https://www.sqlite.org/walformat.html, "The WAL-Index
// Header") holds mxFrame, the last valid frame, in two copies that a
// writer updates one after the other, in the host's byte order. A reader
// that finds the two copies equal has a consistent header, as SQLite's own
// readers do.

// walIndexHeader is the part of the WAL-index header WALInUse reads.
type walIndexHeader struct {
	pageSize int64  // bytes per page
	mxFrame  uint32 // frames in use: the last valid frame
}

// walIndexHeaderSize is the size of one copy of the header.
const walIndexHeaderSize = 48

// walFrameHeaderSize and walHeaderSize are the sizes of a WAL frame's
// header and of the WAL file's own header.
const (
	walFrameHeaderSize = 24
	walHeaderSize      = 32
)

// WALInUse returns how many bytes of the file's WAL hold frames in use:
// zero after a checkpoint restarted it, however long the file still is.
// It reads 96 bytes of the -shm file, and falls back to the WAL file's size
// when there is no index to read, or the store does not own its
// connections (see shmFile).
func (s *Store) WALInUse() (int64, error) {
	if s.path == "" {
		return 0, nil
	}
	if f := s.shmFile(); f != nil {
		h, err := readWALIndexHeader(f)
		if err == nil {
			if h.mxFrame == 0 {
				return 0, nil
			}
			return walHeaderSize + int64(h.mxFrame)*(h.pageSize+walFrameHeaderSize), nil
		}
	}
	info, err := os.Stat(s.path + "-wal")
	switch {
	case err == nil:
		return info.Size(), nil
	case os.IsNotExist(err):
		return 0, nil
	}
	return 0, fmt.Errorf("WAL in use: %w", err)
}

// shmFile returns the store's descriptor of the -shm file, opened at the
// first call and closed by Close after the store's connections: SQLite
// locks the -shm file with POSIX advisory locks, which the process loses,
// all of them, as soon as it closes any descriptor of that file. A
// descriptor opened and closed at each read would drop the locks of the
// store's own connections, and another process could then checkpoint or
// restart the WAL under their feet (SQLITE_IOERR). So it stays open, and
// only a store that closes its own connections (Open, not OpenDB) has one.
// nil when there is none.
func (s *Store) shmFile() *os.File {
	if !s.ownsDBs {
		return nil
	}
	s.shm.once.Do(func() {
		s.shm.f, _ = os.Open(s.path + "-shm") // none yet: fall back to the WAL's size
	})
	return s.shm.f
}

// readWALIndexHeader reads the WAL-index header of the -shm file f.
func readWALIndexHeader(f *os.File) (walIndexHeader, error) {
	var buf [2 * walIndexHeaderSize]byte
	// A writer changes the second copy, then the first: equal copies were
	// read between two of its updates. Retry a few times otherwise.
	for range 8 {
		if _, err := f.ReadAt(buf[:], 0); err != nil {
			if err == io.EOF {
				return walIndexHeader{}, fmt.Errorf("read %s: the WAL index is shorter than its header", f.Name())
			}
			return walIndexHeader{}, err
		}
		first, second := buf[:walIndexHeaderSize], buf[walIndexHeaderSize:]
		if !bytes.Equal(first, second) {
			continue
		}
		if first[12] == 0 { // isInit: no connection built the index yet
			return walIndexHeader{}, fmt.Errorf("read %s: the WAL index is not built", f.Name())
		}
		pageSize := int64(binary.NativeEndian.Uint16(first[14:16]))
		if pageSize == 1 { // how the header spells 65536
			pageSize = 65536
		}
		return walIndexHeader{pageSize: pageSize, mxFrame: binary.NativeEndian.Uint32(first[16:20])}, nil
	}
	return walIndexHeader{}, fmt.Errorf("read %s: the WAL index header kept changing", f.Name())
}
