package io.gpusched.accounting;

import io.gpusched.accounting.AccountingRecord.Checkpoint;
import io.gpusched.accounting.AccountingRecord.DaySummary;
import io.gpusched.accounting.AccountingRecord.DeviceUsage;
import io.gpusched.accounting.AccountingRecord.Interval;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.zip.CRC32;

/**
 * The node's accounting store: {@code <state dir>/accounting/}, one append-only journal per UTC day
 * ({@code YYYY-MM-DD.log}, lines of {@link RecordCodec}) and, for days compacted, a summary beside it
 * ({@code YYYY-MM-DD.sum}: one {@link DaySummary} per owner and one per GPU, and the day's idle-policy steps). Every
 * process of the node may read it without a lock (directory {@code 0755}, files {@code 0644}); one process writes
 * it, the node's sampler, which holds the {@code fcntl} lock on {@code sampler.lock} ({@link #openWriter}).
 *
 * <p>Durability: a batch of records is appended and forced to disk ({@code fsync}) before {@link Writer#append}
 * returns; a new day's file is made durable with its directory. A crash leaves at most a torn last line, which
 * readers skip and the next writer cuts. Compaction ({@link Writer#compact}) rewrites an old day as one interval per
 * allocation (a new file forced, then renamed over the old one, so a reader sees the old file or the new one, never a
 * mix) and writes its summary; retention ({@link Writer#retain}) deletes whole days.
 *
 * <p>Why a file of its own, and not the ledger or an embedded database: reports read a year of a busy node's usage in
 * well under a second from the day summaries (docs/PERFORMANCE.md), readers never take a lock (a reader holding a
 * SQLite read lock stalls its writer; a WAL database needs its readers to write), and the format is the ledger's
 * proven one (checksummed lines, a torn tail cut), documented in docs/ACCOUNTING.md.
 *
 * <p>Why it is about 600 lines: the reader, the recovery scan and the writer (appends all or nothing, torn tails,
 * compaction, retention) share the layout and the file discipline; the format itself is {@link RecordCodec}'s.
 */
public final class AccountingStore {
    /** The store's directory name under a state directory. */
    public static final String DIR = "accounting";
    static final String LOCK = "sampler.lock";
    /** The sweep mark: the latest sweep the idle policy judged, written at every sweep ({@link Writer#mark}). */
    static final String MARK = "sampler.mark";
    /**
     * Two slots of {@link #MARK_SLOT} bytes, written in turn, so a write cut short leaves the other whole; each (big
     * endian): magic, sequence, judged's seconds and nanos, base's seconds and nanos (-1: none), 4 bytes zero, then
     * the CRC-32 of the 44 before.
     */
    static final int MARK_SLOT = 48;
    private static final long MARK_MAGIC = 0x6770_6d61_726b_0001L; // "gpmark", version 1

    private final Path dir;

    private AccountingStore(Path dir) {
        this.dir = dir;
    }

    /** @return the store of a node's state directory (nothing is created or read yet) */
    public static AccountingStore at(Path stateDir) {
        return new AccountingStore(stateDir.toAbsolutePath().normalize().resolve(DIR));
    }

    /** @return the store's directory */
    public Path directory() {
        return dir;
    }

    static String dayName(LocalDate d) {
        return d.toString();
    }

    Path journal(LocalDate d) {
        return dir.resolve(dayName(d) + ".log");
    }

    Path summary(LocalDate d) {
        return dir.resolve(dayName(d) + ".sum");
    }

    static LocalDate dayOf(Instant t) {
        return LocalDate.ofInstant(t, ZoneOffset.UTC);
    }

    /** @return the UTC day of an instant as days since 1970-01-01 ({@link #dayOf}'s {@code toEpochDay}) */
    static long epochDay(Instant t) {
        return Math.floorDiv(t.getEpochSecond(), 86_400L);
    }

    /**
     * A day's journal open for appends, and its size: only the writer appends to it (it holds the sampler lock), so the
     * size is known without asking the file system at every append.
     */
    private static final class Journal {
        final FileChannel channel;
        /** bytes in the file: what was there when it was opened (a torn tail cut), plus what was appended since */
        long size;
        /** the size before the batch being appended (what a failed batch is cut back to) */
        long before;

        Journal(FileChannel channel, long size) {
            this.channel = channel;
            this.size = size;
            this.before = size;
        }
    }

    /** @return the days that have a journal, oldest first (empty when the store does not exist) */
    public List<LocalDate> days() {
        TreeSet<LocalDate> out = new TreeSet<>();
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            return List.of();
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "*.log")) {
            for (Path p : ds) {
                String n = p.getFileName().toString();
                if (n.matches("[0-9]{4}-[0-9]{2}-[0-9]{2}\\.log")) {
                    try {
                        out.add(LocalDate.parse(n.substring(0, 10)));
                    } catch (RuntimeException e) {
                        // not a day: ignored
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list the accounting store " + dir + ": " + e.getMessage(), e);
        }
        return List.copyOf(out);
    }

    /** @return whether the day has a summary (it was compacted and nothing was added since) */
    public boolean hasSummary(LocalDate day) {
        return Files.isRegularFile(summary(day), LinkOption.NOFOLLOW_LINKS);
    }

    /**
     * Reads a day's journal.
     *
     * @param day      the UTC day
     * @param sink     gets each record, in file order
     * @param warnings gets a sentence for each line that is not a valid record (skipped: a damaged line loses that
     *                 record only)
     */
    public void readDay(LocalDate day, Consumer<AccountingRecord> sink, List<String> warnings) {
        read(journal(day), null, sink, warnings);
    }

    /**
     * Reads a day's journal, decoding only the lines that {@code mayHold} accepts (a cheap filter on the raw line, such
     * as whether it holds a job's id; a line it accepts is decoded and checked as ever).
     */
    void readDay(LocalDate day, Predicate<String> mayHold, Consumer<AccountingRecord> sink, List<String> warnings) {
        read(journal(day), mayHold, sink, warnings);
    }

    /** Reads a day's summary rows; a day without one reads nothing. */
    public void readSummary(LocalDate day, Consumer<AccountingRecord> sink, List<String> warnings) {
        read(summary(day), null, sink, warnings);
    }

    /** @return every record of a day's journal (for tests and small days) */
    public List<AccountingRecord> day(LocalDate day) {
        List<AccountingRecord> out = new ArrayList<>();
        List<String> warnings = new ArrayList<>();
        readDay(day, out::add, warnings);
        return out;
    }

    /** Reads one file line by line, bounded; a last line without its newline (a write in progress) is skipped. */
    private static void read(Path file, Predicate<String> mayHold, Consumer<AccountingRecord> sink,
            List<String> warnings) {
        if (!Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) { // before opening: a FIFO would block the open
            warnings.add(file + " is not a regular file (a link, a FIFO, a device?); skipped");
            return;
        }
        InputStream in;
        try {
            in = Files.newInputStream(file, LinkOption.NOFOLLOW_LINKS, StandardOpenOption.READ);
        } catch (NoSuchFileException e) {
            return;
        } catch (IOException e) {
            warnings.add("cannot read " + file + ": " + e.getMessage());
            return;
        }
        try (in) {
            byte[] buf = new byte[1 << 16];
            byte[] line = new byte[1 << 12];
            int len = 0;
            boolean tooLong = false;
            long lineNo = 0;
            int r;
            while ((r = in.read(buf)) > 0) {
                for (int i = 0; i < r; i++) {
                    byte b = buf[i];
                    if (b == '\n') {
                        lineNo++;
                        if (tooLong) {
                            warnings.add(file.getFileName() + " line " + lineNo + ": over "
                                    + RecordCodec.MAX_LINE_BYTES + " bytes; skipped");
                        } else if (len > 0) {
                            String s = new String(line, 0, len, StandardCharsets.UTF_8);
                            if (mayHold != null && !mayHold.test(s)) {
                                len = 0;
                                continue;
                            }
                            try {
                                sink.accept(RecordCodec.decode(s));
                            } catch (AccountingFormatException e) {
                                if (warnings.size() < 100) {
                                    warnings.add(file.getFileName() + " line " + lineNo + ": " + e.getMessage()
                                            + "; skipped");
                                }
                            }
                        }
                        len = 0;
                        tooLong = false;
                    } else if (!tooLong) {
                        if (len == line.length) {
                            if (len >= RecordCodec.MAX_LINE_BYTES) {
                                tooLong = true;
                                continue;
                            }
                            line = Arrays.copyOf(line, Math.min(RecordCodec.MAX_LINE_BYTES, len * 2));
                        }
                        line[len++] = b;
                    }
                }
            }
        } catch (IOException e) {
            warnings.add("cannot read " + file + ": " + e.getMessage());
        }
    }

    /**
     * The sweep mark a sampler left: the latest sweep its idle policy had judged, written to a shared mapping of
     * {@code sampler.mark} at every sweep (no system call, no force: it outlives a killed process, as the page cache
     * does, not a lost machine), with the latest sweep judged by the checkpoint marker it had written last.
     *
     * @param judged the latest sweep judged
     * @param base   the {@link Checkpoint#judged} of the last marker written before it (empty: that marker had none);
     *               the mark continues a store only whose markers end with that one ({@link #recover})
     */
    public record SweepMark(Instant judged, Optional<Instant> base) {
    }

    /** @return the sweep mark the last sampler left, if one is there and whole (a slot's checksum holds) */
    public Optional<SweepMark> sweepMark() {
        Path f = dir.resolve(MARK);
        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
            return Optional.empty();
        }
        ByteBuffer b = ByteBuffer.allocate(2 * MARK_SLOT);
        try (FileChannel ch = FileChannel.open(f, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
            while (b.hasRemaining() && ch.read(b) > 0) {
                // until both slots are read or the file ends
            }
        } catch (IOException e) {
            return Optional.empty();
        }
        if (b.hasRemaining()) {
            return Optional.empty();
        }
        long bestSeq = 0;
        SweepMark best = null;
        for (int slot = 0; slot < 2; slot++) {
            int o = slot * MARK_SLOT;
            CRC32 crc = new CRC32();
            crc.update(b.array(), o, MARK_SLOT - 4);
            if ((int) crc.getValue() != b.getInt(o + MARK_SLOT - 4) || b.getLong(o) != MARK_MAGIC) {
                continue;
            }
            long seq = b.getLong(o + 8);
            long sec = b.getLong(o + 16);
            int nano = b.getInt(o + 24);
            long baseSec = b.getLong(o + 28);
            int baseNano = b.getInt(o + 36);
            if (seq <= bestSeq || nano < 0 || nano > 999_999_999 || baseNano < -1 || baseNano > 999_999_999) {
                continue;
            }
            try {
                best = new SweepMark(Instant.ofEpochSecond(sec, nano), baseNano < 0 ? Optional.empty()
                        : Optional.of(Instant.ofEpochSecond(baseSec, baseNano)));
                bestSeq = seq;
            } catch (DateTimeException e) {
                // out of Instant's range: not a mark
            }
        }
        return Optional.ofNullable(best);
    }

    /**
     * Where each allocation's record stands, read back to the last checkpoint marker: what a sampler that starts
     * continues from.
     *
     * @param tails    per open allocation, its last interval
     * @param markerAt the last checkpoint marker's time, if any
     * @param judged   the latest sweep the idle policy had judged, by the markers read ({@link Checkpoint#judged};
     *                 a marker's own time is not one: a stop on a clock stepped ahead writes it, reviews 44, 45), if
     *                 any
     */
    public record Recovered(Map<String, Interval> tails, Optional<Instant> markerAt, Optional<Instant> judged) {
    }

    /**
     * @param notBefore the oldest day to read back to
     * @return the allocations whose last interval has no end, each with that interval
     */
    public Recovered recover(LocalDate notBefore) {
        return recover(notBefore, null);
    }

    /**
     * As {@link #recover(LocalDate)}, reading also the journals of {@code today} and the day before when the newest
     * checkpoint lies in a later day: a clock that was days ahead (an RTC at boot) and was stepped back wrote markers
     * in future days' journals, and what came after the step back is in today's (review50: an allocation granted
     * since was counted again from its grant at every restart).
     *
     * @param today the day by the clock now, or null
     */
    public Recovered recover(LocalDate notBefore, LocalDate today) {
        List<LocalDate> days = new ArrayList<>(days());
        Set<LocalDate> read = new HashSet<>();
        List<String> warnings = new ArrayList<>();
        Map<String, Interval> last = new HashMap<>();
        Optional<Instant> marker = Optional.empty();
        Instant[] judged = {null};
        for (int i = days.size() - 1; i >= 0 && !days.get(i).isBefore(notBefore); i--) {
            List<AccountingRecord> recs = new ArrayList<>();
            readDay(days.get(i), recs::add, warnings);
            read.add(days.get(i));
            Instant markerHere = null;
            for (AccountingRecord r : recs) {
                if (r instanceof Checkpoint c) {
                    markerHere = c.at();
                    judged[0] = c.judged().map(j -> later(judged[0], j)).orElse(judged[0]);
                }
            }
            for (AccountingRecord r : recs) {
                if (r instanceof Interval iv) {
                    Interval seen = last.get(iv.allocationId());
                    if (seen == null || iv.to().isAfter(seen.to()) || iv.to().equals(seen.to()) && iv.end()
                            .isPresent()) {
                        last.put(iv.allocationId(), iv);
                    }
                }
            }
            if (markerHere != null) {
                marker = Optional.of(markerHere);
                if (i > 0) {
                    // intervals open at the marker have records in this day or the one before it (a batch is
                    // written at one time, but an interval that started yesterday lives in yesterday's file)
                    readDay(days.get(i - 1), r -> {
                        if (r instanceof Interval iv) {
                            last.merge(iv.allocationId(), iv, (a, b) -> a.to().isBefore(b.to()) ? b : a);
                        } else if (r instanceof Checkpoint c) {
                            // a clock stepped back across midnight writes its markers, with their judged, there
                            judged[0] = c.judged().map(j -> later(judged[0], j)).orElse(judged[0]);
                        }
                    }, warnings);
                    read.add(days.get(i - 1));
                }
                break;
            }
        }
        if (today != null) {
            for (LocalDate d : List.of(today.minusDays(1), today)) {
                if (!read.contains(d) && !d.isBefore(notBefore) && days.contains(d)) {
                    readDay(d, r -> {
                        if (r instanceof Checkpoint c) {
                            judged[0] = c.judged().map(j -> later(judged[0], j)).orElse(judged[0]);
                        }
                        if (r instanceof Interval iv) {
                            Interval seen = last.get(iv.allocationId());
                            if (seen == null || iv.to().isAfter(seen.to()) || iv.to().equals(seen.to()) && iv.end()
                                    .isPresent()) {
                                last.put(iv.allocationId(), iv);
                            }
                        }
                    }, warnings);
                }
            }
        }
        Map<String, Interval> open = new LinkedHashMap<>();
        last.forEach((id, iv) -> {
            if (iv.end().isEmpty()) {
                open.put(id, iv);
            }
        });
        return new Recovered(open, marker, Optional.ofNullable(judged[0]));
    }

    private static Instant later(Instant a, Instant b) {
        return a == null || b.isAfter(a) ? b : a;
    }

    /**
     * Opens the store for writing, creating its directory ({@code 0755}) when absent, if no other process is the
     * node's sampler.
     *
     * @return the writer, or empty when another process (or another writer in this JVM) holds the sampler lock
     * @throws UncheckedIOException when the directory cannot be made or is a link
     */
    public Optional<Writer> openWriter() {
        try {
            if (Files.isSymbolicLink(dir)) {
                throw new IOException(dir + " is a symbolic link; the accounting store must be a directory");
            }
            if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
                Files.createDirectories(dir.getParent());
                try {
                    Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(
                            PosixFilePermissions.fromString("rwxr-xr-x")));
                } catch (FileAlreadyExistsException e) {
                    // made meanwhile by another process
                }
                Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
            }
            FileChannel lockChannel = FileChannel.open(dir.resolve(LOCK), StandardOpenOption.CREATE,
                    StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
            FileLock lock;
            try {
                lock = lockChannel.tryLock();
            } catch (OverlappingFileLockException e) {
                lock = null;
            }
            if (lock == null) {
                lockChannel.close();
                return Optional.empty();
            }
            return Optional.of(new Writer(lockChannel, lock));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the accounting store " + dir + " for writing: "
                    + e.getMessage(), e);
        }
    }

    /** The one writer of a node's store: holds the sampler lock until {@link #close()}. Not thread-safe. */
    public final class Writer implements AutoCloseable {
        /** Appends up to this size go through one direct buffer of the writer's. */
        private static final int DIRECT_BYTES = 64 << 10;
        private final FileChannel lockChannel;
        private final FileLock lock;
        /** the journals open for appends, by day */
        private final Map<LocalDate, Journal> open = new HashMap<>();
        private ByteBuffer direct;
        /** the lines of a batch's first day, encoded: one array reused from batch to batch */
        private RecordCodec.Lines lines = new RecordCodec.Lines(DIRECT_BYTES / 4);

        /**
         * the {@link Checkpoint#judged} of the last marker this writer appended (empty: it had none); null before its
         * first: no sweep mark is written until a marker is, so a mark always continues one
         */
        private volatile Optional<Instant> lastMarker;
        private MappedByteBuffer markMap;
        private long markSeq;
        private boolean markFailed;

        private Writer(FileChannel lockChannel, FileLock lock) {
            this.lockChannel = lockChannel;
            this.lock = lock;
        }

        /**
         * Writes the sweep mark ({@link #sweepMark}): {@code judged}, with the judged of the last marker this writer
         * appended. Nothing before its first marker. A store that cannot map the file goes without (logged once by
         * the caller's log: the mark only narrows what a kill loses).
         *
         * @return false when the mark could not be written
         */
        public synchronized boolean mark(Instant judged) {
            Optional<Instant> base = lastMarker;
            if (base == null || markFailed) {
                return !markFailed;
            }
            try {
                if (markMap == null) {
                    Path f = dir.resolve(MARK);
                    try (FileChannel ch = FileChannel.open(f, Set.of(StandardOpenOption.CREATE,
                            StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS),
                            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-r--r--")))) {
                        markMap = ch.map(FileChannel.MapMode.READ_WRITE, 0, 2L * MARK_SLOT);
                    }
                    Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-r--r--"));
                    // the last sampler's mark was read when this one started (before its first marker, which
                    // carries it on): both slots start over
                    for (int i = 0; i < 2 * MARK_SLOT; i++) {
                        markMap.put(i, (byte) 0);
                    }
                    markSeq = 0;
                }
                long seq = ++markSeq;
                int o = (int) (seq & 1) * MARK_SLOT;
                ByteBuffer m = markMap;
                m.putLong(o, MARK_MAGIC);
                m.putLong(o + 8, seq);
                m.putLong(o + 16, judged.getEpochSecond());
                m.putInt(o + 24, judged.getNano());
                m.putLong(o + 28, base.map(Instant::getEpochSecond).orElse(0L));
                m.putInt(o + 36, base.map(Instant::getNano).orElse(-1));
                m.putInt(o + 40, 0);
                CRC32 crc = new CRC32();
                crc.update(m.slice(o, MARK_SLOT - 4));
                m.putInt(o + MARK_SLOT - 4, (int) crc.getValue());
                return true;
            } catch (IOException | RuntimeException e) {
                markFailed = true;
                return false;
            }
        }

        /** @return the store written */
        public AccountingStore store() {
            return AccountingStore.this;
        }

        /**
         * Appends the records, each to the journal of its day, and forces every journal touched to disk before
         * returning. A day that had a summary loses it (the next compaction writes it again).
         *
         * @throws UncheckedIOException when a write or the force fails (nothing after it is acknowledged)
         */
        public void append(List<? extends AccountingRecord> records) {
            if (records.isEmpty()) {
                return;
            }
            // the records of one day (a sweep's, nearly always) are encoded as bytes into the writer's one reused
            // buffer, with no map of days, string or array per batch
            long day = epochDay(records.get(0).at());
            RecordCodec.Lines lines = this.lines;
            lines.clear();
            Map<LocalDate, RecordCodec.Lines> byDay = null;
            for (AccountingRecord r : records) {
                long d = epochDay(r.at());
                if (d != day) {
                    if (byDay == null) {
                        byDay = new LinkedHashMap<>();
                        byDay.put(LocalDate.ofEpochDay(day), lines);
                    }
                    lines = byDay.computeIfAbsent(LocalDate.ofEpochDay(d), x -> new RecordCodec.Lines(512));
                    day = d;
                }
                lines.add(r);
            }
            if (byDay == null) {
                byDay = Map.of(LocalDate.ofEpochDay(day), lines);
            }
            if (this.lines.bytes().length > DIRECT_BYTES) { // a rare large batch's array is not kept
                this.lines = new RecordCodec.Lines(DIRECT_BYTES / 4);
            }
            List<Journal> touched = new ArrayList<>(byDay.size());
            try {
                for (Map.Entry<LocalDate, RecordCodec.Lines> e : byDay.entrySet()) {
                    Journal j = journalOf(e.getKey(), byDay.keySet());
                    j.before = j.size;
                    touched.add(j);
                    RecordCodec.Lines l = e.getValue();
                    write(j.channel, l.bytes(), l.size());
                    j.size += l.size();
                }
                for (Journal j : touched) {
                    j.channel.force(false);
                }
                for (AccountingRecord r : records) {
                    if (r instanceof Checkpoint c) {
                        lastMarker = c.judged();
                    }
                }
            } catch (IOException e) {
                // all or nothing: a batch the disk refused part of is taken back, so a retry neither leaves a torn
                // line in the middle of a journal nor writes the part that did land twice
                for (Journal j : touched) {
                    try {
                        j.channel.truncate(j.before);
                        j.channel.position(j.before);
                        j.size = j.before;
                    } catch (IOException notCut) {
                        // its size is not known now: closed, so the next append opens it again and cuts a torn tail
                        open.values().remove(j);
                        try {
                            j.channel.close();
                        } catch (IOException ignored) {
                            // closing: nothing more to do
                        }
                    }
                }
                throw new UncheckedIOException("cannot append to the accounting store " + dir + ": "
                        + e.getMessage(), e);
            }
        }

        /**
         * Writes the first {@code length} of {@code bytes} at the channel's position, through this writer's direct
         * buffer when they fit.
         */
        private void write(FileChannel ch, byte[] bytes, int length) throws IOException {
            ByteBuffer b;
            if (length <= DIRECT_BYTES) {
                if (direct == null) {
                    direct = ByteBuffer.allocateDirect(DIRECT_BYTES);
                }
                b = direct.clear();
                b.put(bytes, 0, length).flip();
            } else {
                b = ByteBuffer.wrap(bytes, 0, length);
            }
            while (b.hasRemaining()) {
                ch.write(b);
            }
        }

        /**
         * @param day   the journal's day
         * @param batch the days of the batch being appended: their journals stay open until it is forced (or taken
         *              back), however many days it spans
         */
        private Journal journalOf(LocalDate day, Set<LocalDate> batch) throws IOException {
            Journal j = open.get(day);
            if (j != null) {
                return j;
            }
            if (open.size() > 4) { // keep at most a few days open (today, yesterday, a gap's days), never the batch's
                for (Iterator<Map.Entry<LocalDate, Journal>> it = open.entrySet().iterator(); it.hasNext();) {
                    Map.Entry<LocalDate, Journal> e = it.next();
                    if (!batch.contains(e.getKey())) {
                        e.getValue().channel.close();
                        it.remove();
                    }
                }
            }
            Files.deleteIfExists(summary(day));
            Path f = journal(day);
            boolean fresh = !Files.exists(f, LinkOption.NOFOLLOW_LINKS);
            FileChannel ch =
                    FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.READ,
                            LinkOption.NOFOLLOW_LINKS);
            if (fresh) {
                Files.setPosixFilePermissions(f, PosixFilePermissions.fromString("rw-r--r--"));
                forceDirectory();
            }
            try {
                cutTornTail(ch);
                j = new Journal(ch, ch.size());
                ch.position(j.size);
            } catch (IOException | RuntimeException e) {
                ch.close();
                throw e;
            }
            open.put(day, j);
            return j;
        }

        /** Cuts a last line without its newline: a write a crash interrupted, never acknowledged. */
        private void cutTornTail(FileChannel ch) throws IOException {
            long size = ch.size();
            if (size == 0) {
                return;
            }
            ByteBuffer one = ByteBuffer.allocate(1);
            ch.read(one, size - 1);
            if (one.get(0) == '\n') {
                return;
            }
            long pos = size - 1;
            ByteBuffer chunk = ByteBuffer.allocate(8192);
            while (pos > 0) {
                long start = Math.max(0, pos - chunk.capacity());
                chunk.clear().limit((int) (pos - start));
                ch.read(chunk, start);
                for (int i = chunk.limit() - 1; i >= 0; i--) {
                    if (chunk.get(i) == '\n') {
                        ch.truncate(start + i + 1);
                        ch.force(true);
                        return;
                    }
                }
                pos = start;
            }
            ch.truncate(0);
            ch.force(true);
        }

        private void forceDirectory() throws IOException {
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            }
        }

        /**
         * Compacts a day: its intervals become one per allocation (sums, the larger peaks, the first start and the
         * last end), its last checkpoint marker and every idle action are kept, and its summary is written. The new
         * journal is forced and renamed over the old one.
         *
         * @param day a day that no sampler writes to any more (older than {@code gpu.accounting.compact_after})
         */
        public void compact(LocalDate day) {
            List<String> warnings = new ArrayList<>();
            List<AccountingRecord> recs = new ArrayList<>();
            readDay(day, recs::add, warnings);
            Map<String, List<Interval>> byAllocation = new LinkedHashMap<>();
            List<AccountingRecord> others = new ArrayList<>();
            Checkpoint lastMarker = null;
            for (AccountingRecord r : recs) {
                if (r instanceof Interval iv) {
                    List<Interval> ivs = byAllocation.computeIfAbsent(iv.allocationId(), k -> new ArrayList<>(1));
                    Interval m = ivs.isEmpty() ? null : merge(ivs.get(ivs.size() - 1), iv);
                    if (m != null && plausibleEnergy(m)) {
                        ivs.set(ivs.size() - 1, m);
                    } else { // merged, its energy would be refused when read: kept as its own record (review30)
                        ivs.add(iv);
                    }
                } else if (r instanceof Checkpoint c) {
                    lastMarker = c;
                } else if (!(r instanceof DaySummary) && !(r instanceof AccountingRecord.IdleCount)) {
                    // the policy's counts serve a sampler restarted within the stretch's last two days: not kept
                    others.add(r);
                }
            }
            List<Interval> merged = new ArrayList<>();
            byAllocation.values().forEach(merged::addAll);
            List<AccountingRecord> out = new ArrayList<>(merged);
            out.addAll(others);
            if (lastMarker != null) {
                out.add(lastMarker);
            }
            try {
                Journal j = open.remove(day);
                if (j != null) {
                    j.channel.close();
                }
                replace(journal(day), out);
                List<AccountingRecord> sum = summarize(day, merged);
                for (AccountingRecord r : others) {
                    if (r instanceof AccountingRecord.IdleAction) {
                        sum.add(r); // a report over whole days reads the summary alone
                    }
                }
                replace(summary(day), sum);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot compact " + journal(day) + ": " + e.getMessage(), e);
            }
        }

        private void replace(Path target, List<AccountingRecord> records) throws IOException {
            Path tmp = dir.resolve("." + target.getFileName() + ".tmp");
            Files.deleteIfExists(tmp);
            StringBuilder b = new StringBuilder();
            for (AccountingRecord r : records) {
                b.append(RecordCodec.encode(r)).append('\n');
            }
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                    LinkOption.NOFOLLOW_LINKS)) {
                ByteBuffer buf = ByteBuffer.wrap(b.toString().getBytes(StandardCharsets.UTF_8));
                while (buf.hasRemaining()) {
                    ch.write(buf);
                }
                ch.force(true);
            }
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("rw-r--r--"));
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
            forceDirectory();
        }

        /**
         * Deletes every day before {@code oldestKept}, journal and summary.
         *
         * @return the days deleted
         */
        public List<LocalDate> retain(LocalDate oldestKept) {
            List<LocalDate> gone = new ArrayList<>();
            for (LocalDate d : days()) {
                if (d.isBefore(oldestKept)) {
                    try {
                        Journal j = open.remove(d);
                        if (j != null) {
                            j.channel.close();
                        }
                        Files.deleteIfExists(summary(d));
                        Files.deleteIfExists(journal(d));
                        gone.add(d);
                    } catch (IOException e) {
                        throw new UncheckedIOException("cannot delete " + journal(d) + ": " + e.getMessage(), e);
                    }
                }
            }
            return gone;
        }

        /** Closes the journals and releases the sampler lock. */
        @Override
        public void close() {
            for (Journal j : open.values()) {
                try {
                    j.channel.close();
                } catch (IOException e) {
                    // closing: nothing more to do
                }
            }
            open.clear();
            try {
                lock.release();
                lockChannel.close();
            } catch (IOException e) {
                // the lock goes with the channel
            }
        }
    }

    /**
     * @return two intervals of one allocation as one: the first start, the last end, figures added; a {@code gap} only
     *         when both were (what of it was not sampled stays in its figures: held minus sampled time)
     */
    static Interval merge(Interval a, Interval b) {
        Interval lo = a.from().isAfter(b.from()) ? b : a;
        Interval hi = lo == a ? b : a;
        Map<Integer, DeviceUsage> devices = new LinkedHashMap<>();
        for (Interval iv : List.of(lo, hi)) {
            for (DeviceUsage d : iv.devices()) {
                devices.merge(d.index(), d, (x, y) -> {
                    TreeSet<String> notes = new TreeSet<>(x.notes());
                    notes.addAll(y.notes());
                    List<String> n = new ArrayList<>(notes);
                    return new DeviceUsage(x.index(), x.uuid(), x.figures().add(y.figures()),
                            y.counterAtEnd().isPresent() ? y.counterAtEnd() : x.counterAtEnd(),
                            n.subList(0, Math.min(n.size(), RecordCodec.MAX_NOTES)));
                });
            }
        }
        Instant to = hi.to().isAfter(lo.to()) ? hi.to() : lo.to();
        return new Interval(lo.allocationId(), lo.owner().or(hi::owner), lo.ownerUid().isPresent() ? lo.ownerUid()
                : hi.ownerUid(), lo.jobId().or(hi::jobId), lo.from(), to, lo.first() || hi.first(),
                hi.end().or(lo::end), lo.gap() && hi.gap(), hi.idleSince(), new ArrayList<>(devices.values()));
    }

    /** @return the parts of a summary row (null: none yet) with {@code more} added, at most the codec's bound */
    private static int parts(DaySummary row, int more) {
        return (int) Math.min(RecordCodec.MAX_PARTS, (row == null ? 0L : row.parts()) + more);
    }

    /** @return whether every device's energy of an interval is one the reader accepts */
    private static boolean plausibleEnergy(Interval iv) {
        for (DeviceUsage d : iv.devices()) {
            if (!RecordCodec.plausibleEnergy(d.figures())) {
                return false;
            }
        }
        return true;
    }

    /**
     * @return the day's summary: one row per owner (all its GPUs) and one per GPU (all owners); {@code n} counts the
     *         allocations granted that day, per owner, and per GPU on their first GPU; an owner row carries the GPU
     *         indices its allocations held and their devices' notes, a GPU row its own notes (each ascending and
     *         bounded as the codec reads them), so a report reads the same rows from the summary as from the
     *         intervals (review53)
     */
    static List<AccountingRecord> summarize(LocalDate day, Iterable<Interval> intervals) {
        Map<String, DaySummary> owners = new LinkedHashMap<>();
        Map<String, TreeSet<Integer>> ownerGpus = new HashMap<>();
        Map<String, TreeSet<String>> ownerNotes = new HashMap<>();
        Map<Integer, DaySummary> gpus = new TreeMap<>();
        Map<Integer, TreeSet<String>> gpuNotes = new HashMap<>();
        for (Interval iv : intervals) {
            String key = iv.owner().orElse("") + "\u0000" + iv.ownerUid();
            DaySummary o = owners.get(key);
            int devices = Math.max(1, iv.devices().size()); // each device's figures had their own energy allowance
            owners.put(key, new DaySummary(day, iv.owner(), iv.ownerUid(), OptionalInt.empty(), Optional.empty(),
                    (o == null ? 0 : o.allocations()) + (iv.first() ? 1 : 0),
                    o == null ? iv.total() : o.figures().add(iv.total()), parts(o, devices)));
            TreeSet<Integer> held = ownerGpus.computeIfAbsent(key, k -> new TreeSet<>());
            TreeSet<String> said = ownerNotes.computeIfAbsent(key, k -> new TreeSet<>());
            boolean firstDevice = true;
            for (DeviceUsage d : iv.devices()) {
                DaySummary g = gpus.get(d.index());
                gpus.put(d.index(), new DaySummary(day, Optional.empty(), OptionalLong.empty(),
                        OptionalInt.of(d.index()), Optional.of(d.uuid()),
                        (g == null ? 0 : g.allocations()) + (iv.first() && firstDevice ? 1 : 0),
                        g == null ? d.figures() : g.figures().add(d.figures()), parts(g, 1)));
                firstDevice = false;
                held.add(d.index());
                said.addAll(d.notes());
                gpuNotes.computeIfAbsent(d.index(), k -> new TreeSet<>()).addAll(d.notes());
            }
        }
        List<AccountingRecord> out = new ArrayList<>();
        for (Map.Entry<String, DaySummary> e : owners.entrySet()) {
            out.add(withGpusAndNotes(e.getValue(), ownerGpus.get(e.getKey()), ownerNotes.get(e.getKey())));
        }
        for (Map.Entry<Integer, DaySummary> e : gpus.entrySet()) {
            out.add(withGpusAndNotes(e.getValue(), Set.of(), gpuNotes.get(e.getKey())));
        }
        return out;
    }

    /** @return the row with the GPU indices and the notes, each the first ones in order, as many as the codec reads */
    private static DaySummary withGpusAndNotes(DaySummary s, Collection<Integer> gpus, Collection<String> notes) {
        return new DaySummary(s.day(), s.owner(), s.ownerUid(), s.index(), s.uuid(), s.allocations(), s.figures(),
                s.parts(), gpus.stream().limit(RecordCodec.MAX_DEVICES).toList(),
                notes.stream().limit(RecordCodec.MAX_NOTES).toList());
    }

    @Override
    public String toString() {
        return "AccountingStore[" + dir + "]";
    }
}
