package transcript

import (
	"log/slog"
	"os"
)

// fileTail is the read position in one file: bytes [0, off) are processed lines, [off, scan)
// are the start of a line whose '\n' has not been written yet.
type fileTail struct {
	path string
	src  source
	file *os.File
	info os.FileInfo
	off  int64
	scan int64
}

func (f *fileTail) close() {
	if f.file != nil {
		_ = f.file.Close()
		f.file = nil
	}
}

// poll reads the file from where it stopped to its current end and returns the bytes read.
func (f *fileTail) poll(t *Tailer) int64 {
	st, err := os.Stat(f.path)
	if err != nil {
		if f.file == nil {
			return 0
		}
		// Removed (or unreadable) by name: the open file still holds what the agent writes.
		if st, err = f.file.Stat(); err != nil {
			return 0
		}
	}
	if f.file == nil || !os.SameFile(f.info, st) {
		reopened := f.file != nil
		f.close()
		file, err := os.Open(f.path)
		if err != nil {
			return 0
		}
		info, err := file.Stat()
		if err != nil {
			_ = file.Close()
			return 0
		}
		if reopened {
			t.log.Warn("transcript replaced; reading the new file from the start", slog.String("path", f.path))
		}
		f.file, f.info, f.off, f.scan = file, info, 0, 0
		st = info
	}
	if size := st.Size(); size < f.scan {
		t.log.Warn("transcript shrank; reading from the start",
			slog.String("path", f.path), slog.Int64("size", size), slog.Int64("offset", f.scan))
		f.off, f.scan = 0, 0
	}
	var read int64
	for {
		n, err := f.file.ReadAt(t.readBuf, f.scan)
		if n > 0 {
			f.consume(t, t.readBuf[:n])
			f.scan += int64(n)
			read += int64(n)
			t.beat()
		}
		if err != nil || n < len(t.readBuf) {
			break
		}
	}
	if read > 0 {
		t.mu.Lock()
		t.sum.Bytes += read
		t.mu.Unlock()
	}
	return read
}

// consume handles every complete line in chunk, which holds the file's bytes from f.scan.
func (f *fileTail) consume(t *Tailer, chunk []byte) {
	chunkStart := f.scan
	pos := 0
	for {
		i := indexNewline(chunk[pos:])
		if i < 0 {
			return
		}
		nl := chunkStart + int64(pos+i)
		lineLen := nl - f.off
		if f.off >= chunkStart {
			line := chunk[f.off-chunkStart : pos+i]
			if lineLen > t.maxLine {
				line = line[:min(len(line), headBytes)]
			}
			t.processLine(f.src, line, lineLen)
		} else {
			f.processSpanning(t, lineLen)
		}
		f.off = nl + 1
		pos += i + 1
	}
}

// processSpanning handles a line that started in an earlier read: it is read again from the
// file (the file is the buffer, so a line still being written costs no memory), in full when it
// is at most maxLine bytes, else its head only.
func (f *fileTail) processSpanning(t *Tailer, lineLen int64) {
	var buf []byte
	if lineLen > t.maxLine {
		buf = t.headBuf[:min(int64(len(t.headBuf)), lineLen)]
	} else {
		if int64(cap(t.lineBuf)) < lineLen {
			t.lineBuf = make([]byte, lineLen)
		}
		buf = t.lineBuf[:lineLen]
	}
	n, err := f.file.ReadAt(buf, f.off)
	if n < len(buf) {
		// The file shrank under us; the next poll sees the new size and starts again.
		t.log.Warn("transcript changed while a line was read; skipping it",
			slog.String("path", f.path), slog.Int64("offset", f.off), slog.Any("error", err))
		return
	}
	t.processLine(f.src, buf, lineLen)
	if cap(t.lineBuf) > keepLineBufBytes {
		t.lineBuf = nil
	}
}
