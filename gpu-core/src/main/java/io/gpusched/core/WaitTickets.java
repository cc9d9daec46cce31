package io.gpusched.core;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SecureDirectoryStream;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node-wide queue of waiting allocations, shared by every process of a node ledger: one empty file per ticket in
 * {@code <stateDir>/waiters/}, named {@code <number>-<pid>-<start time>-<deadline>} (number zero-padded to 19 digits,
 * the holder process as {@link HolderProcess}, the waiter's deadline in epoch milliseconds). Tickets are registered
 * and judged under the node's lock, so a new ticket's number is larger than every ticket present. A ticket is live
 * while its process runs (pid and start time) and its deadline has not passed by more than {@link #GRACE_MILLIS};
 * other tickets are skipped and deleted, so a process that dies or hangs past its deadline never blocks the node.
 * Tickets are not forced to disk: after a machine crash no waiter is left anyway.
 */
final class WaitTickets {
    private static final Logger LOG = LoggerFactory.getLogger(WaitTickets.class);
    static final String DIR = "waiters";
    /** A ticket whose deadline passed this long ago is stale (its waiter should have removed it). */
    static final long GRACE_MILLIS = 10_000;

    /**
     * One registered waiter.
     *
     * @param number   its place in the node's queue (smaller: earlier)
     * @param holder   the waiting process
     * @param deadline epoch milliseconds after which it gives up
     * @param name     its file name
     */
    record Ticket(long number, HolderProcess holder, long deadline, String name) {
    }

    private final Path dir;
    private final StateGroup group;
    private final HolderProcess me;
    private final LongSupplier wallClock;
    private final Predicate<HolderProcess> alive;
    private final Set<String> mine = ConcurrentHashMap.newKeySet();

    WaitTickets(Path stateDir, HolderProcess me, LongSupplier wallClock, Predicate<HolderProcess> alive) {
        this(stateDir, StateGroup.NONE, me, wallClock, alive);
    }

    WaitTickets(Path stateDir, StateGroup group, HolderProcess me, LongSupplier wallClock,
            Predicate<HolderProcess> alive) {
        this.dir = stateDir.resolve(DIR);
        this.group = group;
        this.me = me;
        this.wallClock = wallClock;
        this.alive = alive;
        if (Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            LedgerDirectorySecurity.checkNotWritableByOthers(dir, "waiters directory", group, false);
        }
    }

    /** An operation on the waiters directory. */
    private interface InWaiters<T> {
        T apply(SecureDirectoryStream<Path> waiters) throws IOException;
    }

    /**
     * Runs {@code op} on the waiters directory opened without following a link ({@code openat} with
     * {@code O_NOFOLLOW}), so that names created, listed and removed there are relative to that very directory even
     * where others may rename entries of the state directory (one the state group shares); {@code op} gets null where
     * the platform has no secure directory streams, and works on the path.
     */
    private <T> T inWaiters(InWaiters<T> op) throws IOException {
        try (DirectoryStream<Path> state = Files.newDirectoryStream(dir.getParent())) {
            if (state instanceof SecureDirectoryStream<Path> s) {
                try (SecureDirectoryStream<Path> w = s.newDirectoryStream(dir.getFileName(),
                        LinkOption.NOFOLLOW_LINKS)) {
                    return op.apply(w);
                }
            }
        }
        return op.apply(null);
    }

    /**
     * @return the tickets of a state directory, or empty where {@code /proc} cannot identify this process (tickets
     *         could not be told alive or dead there, so cross-process fairness is off)
     */
    static Optional<WaitTickets> of(Path stateDir) {
        long pid = ProcessHandle.current().pid();
        Optional<Long> start = HolderProcess.startTimeOf(pid, Path.of("/proc"));
        if (start.isEmpty()) {
            LOG.warn("/proc does not show this process: waiting allocations are not queued across processes");
            return Optional.empty();
        }
        return Optional.of(new WaitTickets(stateDir, StateGroup.NONE, new HolderProcess(pid, start.get()),
                System::currentTimeMillis, HolderProcess::isAlive));
    }

    /** As {@link #of(Path)}, in a state directory the state group {@code group} may share. */
    static Optional<WaitTickets> of(Path stateDir, StateGroup group) {
        return of(stateDir).map(t -> new WaitTickets(stateDir, group, t.me, t.wallClock, t.alive));
    }

    /** @return the directory holding the tickets */
    Path directory() {
        return dir;
    }

    private List<Ticket> present() {
        List<Ticket> out = new ArrayList<>();
        try {
            inWaiters(w -> {
                if (w != null) {
                    w.forEach(p -> parse(p.getFileName().toString()).ifPresent(out::add));
                    return null;
                }
                try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
                    ds.forEach(p -> parse(p.getFileName().toString()).ifPresent(out::add));
                }
                return null;
            });
        } catch (NoSuchFileException e) {
            return out;
        } catch (IOException e) {
            throw new LedgerException(LedgerException.Kind.IO, dir, "cannot list the waiting allocations in " + dir
                    + ": " + e, e);
        }
        out.sort(Comparator.comparingLong(Ticket::number).thenComparing(Ticket::name));
        return out;
    }

    static Optional<Ticket> parse(String name) {
        String[] f = name.split("-", -1);
        if (f.length != 4) {
            return Optional.empty();
        }
        try {
            long n = Long.parseLong(f[0]);
            long pid = Long.parseLong(f[1]);
            long start = Long.parseLong(f[2]);
            long deadline = Long.parseLong(f[3]);
            if (n < 0 || pid < 1 || start < 0) {
                return Optional.empty();
            }
            return Optional.of(new Ticket(n, new HolderProcess(pid, start), deadline, name));
        } catch (NumberFormatException e) {
            return Optional.empty();
        }
    }

    private boolean live(Ticket t, long now) {
        return (t.deadline() > Long.MAX_VALUE - GRACE_MILLIS || now <= t.deadline() + GRACE_MILLIS)
                && (mine.contains(t.name()) || alive.test(t.holder()));
    }

    /**
     * Under the node's lock: the live tickets, oldest first. Tickets of dead processes and stale ones are deleted.
     */
    List<Ticket> live() {
        long now = wallClock.getAsLong();
        List<Ticket> out = new ArrayList<>();
        for (Ticket t : present()) {
            if (live(t, now)) {
                out.add(t);
            } else {
                LOG.info("removing the waiting ticket {} of {}: {}", t.number(), t.holder(),
                        alive.test(t.holder()) ? "its deadline passed long ago" : "the process is gone");
                delete(t);
            }
        }
        return out;
    }

    /** Cheap, without the lock, for waiters polling: changes when the set of live tickets changes. */
    Object stamp() {
        try {
            long now = wallClock.getAsLong();
            List<String> names = new ArrayList<>();
            for (Ticket t : present()) {
                if (live(t, now)) {
                    names.add(t.name());
                }
            }
            return names;
        } catch (RuntimeException e) {
            return List.of();
        }
    }

    /**
     * Under the node's lock: registers a waiter of this process, younger than every ticket present.
     *
     * @param deadline epoch milliseconds when the waiter gives up
     */
    Ticket register(long deadline) {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            try {
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwxr-xr-x")));
                Files.setAttribute(dir, "unix:mode", LedgerDirectorySecurity.directoryMode(dir.getParent(), group),
                        LinkOption.NOFOLLOW_LINKS);
            } catch (FileAlreadyExistsException e) {
                // another process made it meanwhile: checked below
            } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
                throw new LedgerException(LedgerException.Kind.IO, dir, "cannot create " + dir + ": " + e, null);
            }
        }
        LedgerDirectorySecurity.checkNotWritableByOthers(dir, "waiters directory", group, false);
        Set<PosixFilePermission> mode = LedgerDirectorySecurity.fileMode(dir, group);
        List<Ticket> all = present();
        long n = all.isEmpty() ? 1 : all.get(all.size() - 1).number() + 1;
        while (true) {
            String name = String.format(Locale.ROOT, "%019d-%d-%d-%d", n, me.pid(), me.startTime(), deadline);
            mine.add(name);
            try {
                inWaiters(w -> {
                    if (w == null) {
                        Files.createFile(dir.resolve(name), PosixFilePermissions.asFileAttribute(mode));
                    } else {
                        w.newByteChannel(Path.of(name), Set.of(StandardOpenOption.CREATE_NEW,
                                StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(mode)).close();
                    }
                    return null;
                });
                return new Ticket(n, me, deadline, name);
            } catch (FileAlreadyExistsException e) {
                mine.remove(name);
                n++;
            } catch (IOException e) {
                mine.remove(name);
                throw new LedgerException(String.valueOf(e.getMessage()).contains("No space left")
                        ? LedgerException.Kind.NO_SPACE : LedgerException.Kind.IO, dir,
                        "cannot register a waiting allocation in " + dir + ": " + e, e);
            }
        }
    }

    /** Removes a ticket (this process's, or a dead one). Never throws. */
    void remove(Ticket t) {
        if (t != null) {
            delete(t);
            mine.remove(t.name());
        }
    }

    private void delete(Ticket t) {
        try {
            inWaiters(w -> {
                if (w == null) {
                    Files.deleteIfExists(dir.resolve(t.name()));
                } else {
                    try {
                        w.deleteFile(Path.of(t.name())); // unlinkat in that very directory
                    } catch (NoSuchFileException gone) {
                        // removed by its owner or another process meanwhile
                    }
                }
                return null;
            });
        } catch (NoSuchFileException e) {
            // no waiters directory: nothing to remove
        } catch (IOException | RuntimeException e) {
            LOG.warn("cannot remove the waiting ticket {}: {}", dir.resolve(t.name()), e.toString());
        }
    }

    /** Removes every ticket this scheduler registered and still holds. Never throws. */
    void close() {
        for (String name : List.copyOf(mine)) {
            parse(name).ifPresent(this::remove);
        }
    }
}
