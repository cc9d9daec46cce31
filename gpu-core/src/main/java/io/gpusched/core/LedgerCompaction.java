package io.gpusched.core;

import static io.gpusched.core.LedgerException.io;

import io.gpusched.core.LedgerException.Kind;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * A new generation of the node ledger file: a header, then the whole state as one snapshot record, written to
 * {@code ledger.new}, forced, and renamed over {@code ledger} (then the directory forced). Makes a new ledger's first
 * file, and compacts a ledger grown past its threshold ({@link #COMPACT_AT} by default). Runs under the node's lock;
 * every other process sees the file's identity change and reloads (see {@link LedgerFile}).
 */
final class LedgerCompaction {
    /** Compact once the file is this large (bytes) by default; system property {@code gpusched.ledger.compactBytes}. */
    static final long COMPACT_AT = 8L << 20;

    private LedgerCompaction() {
    }

    /** @return the threshold set by {@code gpusched.ledger.compactBytes}, else {@link #COMPACT_AT} */
    static long threshold() {
        return Long.getLong("gpusched.ledger.compactBytes", COMPACT_AT);
    }

    /**
     * Writes a new ledger file (header, then the state as one snapshot record) and renames it over the old.
     *
     * @param dir   the state directory
     * @param file  the ledger file in it
     * @param p     the node's id prefix
     * @param gen   the new file's generation
     * @param s     the state to keep, or null for a new, empty ledger
     * @param group the state group: in a directory it shares, the file is made {@code 0660}
     * @throws LedgerException {@code NO_SPACE} or {@code IO}; the old file is then as it was
     */
    static void writeGeneration(Path dir, Path file, String p, long gen, NodeState s, StateGroup group) {
        Path tmp = dir.resolve(LedgerFile.FILE + ".new");
        StringBuilder sb = new StringBuilder();
        sb.append(LedgerCodec.header(p, gen));
        if (s != null) {
            LedgerCodec.line(sb, s.sequence, LedgerRecord.toJson(s.toSnapshot()));
        }
        try {
            // whatever is there is a leftover of a failed compaction, or planted: removed (a link itself, never its
            // target), then created new, so a FIFO cannot block this change under the node's lock and a link cannot
            // point the write elsewhere
            Files.deleteIfExists(tmp);
        } catch (IOException e) {
            throw new LedgerException(Kind.IO, tmp, "cannot remove " + tmp + " (left by an earlier compaction, or not"
                    + " a regular file) to compact the ledger: " + e.getMessage(), e);
        }
        Set<PosixFilePermission> mode = LedgerDirectorySecurity.fileMode(dir, group);
        try (FileChannel c = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(mode))) {
            ByteBuffer b = ByteBuffer.wrap(sb.toString().getBytes(StandardCharsets.UTF_8));
            while (b.hasRemaining()) {
                c.write(b);
            }
            c.force(true);
            // the umask may have narrowed the mode: readers (a YARN container's user) need to read the ledger, and
            // the state group to write it; set without following a link planted meanwhile
            LedgerDirectorySecurity.setMode(tmp, mode);
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // best effort
            }
            boolean full = String.valueOf(e.getMessage()).contains("No space left");
            throw new LedgerException(full ? Kind.NO_SPACE : Kind.IO, tmp, "cannot write " + tmp + ": "
                    + e.getMessage(), e);
        }
        try {
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            } catch (IOException ignored) {
                // some file systems cannot sync a directory
            }
        } catch (IOException e) {
            throw io("cannot rename " + tmp + " to " + file, file, e);
        }
    }
}
