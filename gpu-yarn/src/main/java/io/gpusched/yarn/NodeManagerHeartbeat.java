package io.gpusched.yarn;

import io.gpusched.core.Allocation;
import io.gpusched.core.HolderProcess;
import java.io.IOException;
import java.io.InputStream;
import java.io.StringReader;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;

/**
 * The durable sign that a YARN NodeManager with gpusched's plug-in runs on this node: the file
 * {@value #FILE} in the node ledger's state directory, rewritten (atomically, by rename) by the plug-in's follower
 * thread every tick. It names the NodeManager's process (pid and the kernel's start time, so a reused pid is not
 * taken for it), when it was last written, how often it is written, and after how long without a NodeManager the
 * records of YARN containers count as outliving YARN ({@link GpuschedDevicePlugin#KEY_OUTLIVED_AFTER_MS}).
 *
 * <p>Why a heartbeat, not records bound to the NodeManager's process: the records of YARN containers must outlive a
 * NodeManager restart with recovery, as the containers do, so they cannot be released when the NodeManager process
 * ends. What {@code gpusched status} and {@code doctor} need is when a NodeManager last ran: the heartbeat says so
 * across restarts, and its process identity says whether one runs right now.
 *
 * <p>{@link #outlived} is what {@code status} and {@code doctor} ask: records of YARN containers held while no
 * NodeManager has run for the configured time.
 *
 * @param pid          the NodeManager's process id
 * @param startTime    its start time ({@code /proc/<pid>/stat} field 22)
 * @param host         the host name it ran on
 * @param at           when it wrote the heartbeat last
 * @param every        how often it writes it
 * @param outlivedAfter after how long without a NodeManager its containers' records are flagged
 */
public record NodeManagerHeartbeat(long pid, long startTime, String host, Instant at, Duration every,
        Duration outlivedAfter) {
    /** The heartbeat's file name in the state directory. */
    public static final String FILE = "yarn-nodemanager";
    /** Default of {@link GpuschedDevicePlugin#KEY_OUTLIVED_AFTER_MS}: 10 minutes. */
    public static final Duration DEFAULT_OUTLIVED_AFTER = Duration.ofMinutes(10);
    /** A heartbeat file larger than this is not one. */
    static final int MAX_BYTES = 4096;

    /**
     * Records of YARN containers held in the node ledger while no NodeManager has run for a while.
     *
     * @param ids       the records' allocation ids, oldest first
     * @param lastSeen  when a NodeManager was last seen: its last heartbeat, or the newest record (a NodeManager ran
     *                  then), whichever is later
     * @param after     the configured time without a NodeManager after which they are flagged
     * @param heartbeat the last heartbeat, if one was found
     */
    public record Outlived(List<String> ids, Instant lastSeen, Duration after,
            Optional<NodeManagerHeartbeat> heartbeat) {

        /**
         * @param command the {@code gpusched} command with the options that name this node ({@code gpusched
         *                --state-dir /var/lib/gpusched}); {@code release} and the ids are appended
         * @return one paragraph: what is held, since when no NodeManager ran, and the one command that clears them
         */
        public String describe(String command) {
            return ids.size() + " allocation" + (ids.size() == 1 ? "" : "s") + " of YARN containers (" + String.join(
                    ", ", ids) + ") held while no NodeManager has run since " + lastSeen
                    + heartbeat.map(h -> " (its"
                            + " last heartbeat: pid " + h.pid() + " on " + h.host() + ")").orElse(" (no NodeManager"
                                    + " heartbeat here; the newest record's time)")
                    + ", more than " + after + ". A"
                    + " NodeManager started again with recovery releases those of its containers that ended; if YARN"
                    + " was removed from this node, release them with: " + command + " release " + String.join(" ",
                            ids);
        }
    }

    /** @return whether the NodeManager process this heartbeat names runs now (pid and start time) */
    public boolean running() {
        try {
            return new HolderProcess(pid, startTime).isAlive();
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /**
     * Writes this process's heartbeat into {@code stateDir}: a new file of a random name (created, never opened
     * through a link), renamed over {@value #FILE} (a rename replaces a link itself, never its target). Not forced:
     * after a machine crash the previous one, or none, is read.
     *
     * @throws IOException when it cannot be written
     */
    static void write(Path stateDir, Duration every, Duration outlivedAfter) throws IOException {
        HolderProcess me = HolderProcess.current();
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            host = "localhost";
        }
        String text = "# the YARN NodeManager with gpusched's plug-in on this node, rewritten every tick\n"
                + "pid=" + me.pid() + "\nstart=" + me.startTime() + "\nhost=" + host.replaceAll("[^A-Za-z0-9._-]",
                        "_")
                + "\nat=" + System.currentTimeMillis() + "\nevery_ms=" + every.toMillis()
                + "\noutlived_after_ms=" + outlivedAfter.toMillis() + "\n";
        byte[] rnd = new byte[6];
        new SecureRandom().nextBytes(rnd);
        Path tmp = stateDir.resolve("." + FILE + "." + HexFormat.of().formatHex(rnd) + ".tmp");
        // readable by every user (status runs as anyone); writable by the group where the directory is group-shared
        Set<PosixFilePermission> mode = PosixFilePermissions.fromString(Files.getPosixFilePermissions(stateDir)
                .contains(PosixFilePermission.GROUP_WRITE) ? "rw-rw-r--" : "rw-r--r--");
        try (FileChannel c = FileChannel.open(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS), PosixFilePermissions.asFileAttribute(mode))) {
            ByteBuffer b = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
            while (b.hasRemaining()) {
                c.write(b);
            }
        }
        try {
            // the umask may have narrowed the mode; set without following a link (one planted meanwhile fails)
            Files.getFileAttributeView(tmp, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .setPermissions(mode);
            Files.move(tmp, stateDir.resolve(FILE), StandardCopyOption.ATOMIC_MOVE,
                    StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
    }

    /**
     * Reads the heartbeat of {@code stateDir}: a regular file (not a link, FIFO or device) of at most
     * {@value #MAX_BYTES} bytes with every field well formed.
     *
     * @return the heartbeat, or empty when there is none or it is not one (nothing is concluded from it)
     */
    public static Optional<NodeManagerHeartbeat> read(Path stateDir) {
        Path f = stateDir.resolve(FILE);
        try {
            BasicFileAttributes a = Files.readAttributes(f, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (!a.isRegularFile() || a.size() > MAX_BYTES) {
                return Optional.empty();
            }
            byte[] body;
            try (InputStream in = Files.newInputStream(f, StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS)) {
                body = in.readNBytes(MAX_BYTES + 1);
            }
            if (body.length > MAX_BYTES) {
                return Optional.empty();
            }
            Properties p = new Properties();
            p.load(new StringReader(new String(body, StandardCharsets.UTF_8)));
            long pid = Long.parseLong(p.getProperty("pid", "").strip());
            long start = Long.parseLong(p.getProperty("start", "").strip());
            String host = p.getProperty("host", "?").strip();
            long at = Long.parseLong(p.getProperty("at", "").strip());
            long every = Long.parseLong(p.getProperty("every_ms", "").strip());
            long after = Long.parseLong(p.getProperty("outlived_after_ms", "").strip());
            if (pid < 1 || start < 0 || at < 0 || every < 0 || after < 0 || host.length() > 255) {
                return Optional.empty();
            }
            return Optional.of(new NodeManagerHeartbeat(pid, start, host.replaceAll("[^A-Za-z0-9._-]", "_"),
                    Instant.ofEpochMilli(at), Duration.ofMillis(every), Duration.ofMillis(after)));
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /**
     * Finds the records of YARN containers that outlived YARN: held while no NodeManager has run for
     * {@link #outlivedAfter} (of the last heartbeat; {@link #DEFAULT_OUTLIVED_AFTER} without one). A NodeManager
     * counts as running while the process its heartbeat names runs, and as last seen when its heartbeat was written
     * (without a heartbeat, when the newest record of a YARN container was made: a NodeManager ran then).
     *
     * @param stateDir    the node ledger's state directory
     * @param allocations the node's live allocations
     * @param now         the time now
     * @return the records, or empty when there are none, or a NodeManager runs or ran recently enough
     */
    public static Optional<Outlived> outlived(Path stateDir, List<Allocation> allocations, Instant now) {
        List<Allocation> yarn = new ArrayList<>();
        for (Allocation a : allocations) {
            if (YarnContainerGpus.isContainerRecord(a)) {
                yarn.add(a);
            }
        }
        if (yarn.isEmpty()) {
            return Optional.empty();
        }
        Optional<NodeManagerHeartbeat> hb = read(stateDir);
        if (hb.isPresent() && hb.get().running()) {
            return Optional.empty();
        }
        Instant newest = yarn.stream().map(Allocation::createdAt).max(Comparator.naturalOrder()).orElseThrow();
        Instant lastSeen = hb.map(h -> h.at().isAfter(newest) ? h.at() : newest).orElse(newest);
        Duration after = hb.map(NodeManagerHeartbeat::outlivedAfter).orElse(DEFAULT_OUTLIVED_AFTER);
        if (Duration.between(lastSeen, now).compareTo(after) < 0) {
            return Optional.empty();
        }
        yarn.sort(Comparator.comparing(Allocation::createdAt));
        return Optional.of(new Outlived(yarn.stream().map(Allocation::id).toList(), lastSeen, after, hb));
    }
}
