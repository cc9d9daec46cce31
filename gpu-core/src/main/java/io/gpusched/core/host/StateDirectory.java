package io.gpusched.core.host;

import io.gpusched.core.GpuException;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.LedgerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The one rule that says where a node's ledger lives, used by the library's hosts, the {@code gpusched} command, the
 * console and every engine plug-in, so that every process of a node finds the same ledger.
 *
 * <ol>
 *   <li>A directory given explicitly ({@code --state-dir}, an engine's {@code stateDir} setting,
 *       {@code gpu.state_dir}) is used as it is.</li>
 *   <li>Otherwise the base is {@code $GPUSCHED_STATE_DIR}, else {@code /var/lib/gpusched} for root, else
 *       {@code $XDG_STATE_HOME/gpusched} (when absolute), else {@code ~/.local/state/gpusched}.</li>
 *   <li>A real node uses the base itself. A simulated node uses {@code <base>/simulated/<profile>} (a YAML
 *       description: {@code <base>/simulated/<file name>-<8 hex digits of its absolute path>}), so trying gpusched
 *       with {@code --simulate} never touches the real node's ledger.</li>
 * </ol>
 * Every ledger also records which node it describes, and a process whose inventory is another node is refused
 * (see {@code GpuScheduler.Builder.stateDir}).
 */
public final class StateDirectory {
    /** The environment variable that sets the base directory. */
    public static final String ENV = "GPUSCHED_STATE_DIR";

    private StateDirectory() {
    }

    /** @return the base directory for this process: {@code $GPUSCHED_STATE_DIR}, else the per-user default */
    public static Path base() {
        return base(System.getenv(), isRoot(), Path.of(System.getProperty("user.home", "/")));
    }

    /**
     * @param env  the environment ({@code GPUSCHED_STATE_DIR}, {@code XDG_STATE_HOME})
     * @param root whether the user is root
     * @param home the user's home directory
     * @return the base directory for such a process
     */
    public static Path base(Map<String, String> env, boolean root, Path home) {
        String explicit = env.get(ENV);
        if (explicit != null && !explicit.isBlank()) {
            return Path.of(explicit).toAbsolutePath().normalize();
        }
        return userDefault(root, env.get("XDG_STATE_HOME"), home);
    }

    /**
     * @param root         whether the user is root
     * @param xdgStateHome {@code $XDG_STATE_HOME}, or null
     * @param home         the user's home directory
     * @return {@code /var/lib/gpusched} for root, else {@code $XDG_STATE_HOME/gpusched} (when absolute), else
     *         {@code ~/.local/state/gpusched}
     */
    public static Path userDefault(boolean root, String xdgStateHome, Path home) {
        if (root) {
            return Path.of("/var/lib/gpusched");
        }
        if (xdgStateHome != null && !xdgStateHome.isBlank() && Path.of(xdgStateHome).isAbsolute()) {
            return Path.of(xdgStateHome, "gpusched");
        }
        return Objects.requireNonNull(home, "home").resolve(".local").resolve("state").resolve("gpusched");
    }

    /**
     * @param given     a directory given explicitly, or empty
     * @param inventory the node
     * @return where the node's ledger lives
     * @throws LedgerException {@code NOT_A_DIRECTORY} for an empty name given (it would be the working directory)
     */
    public static Path forNode(Optional<Path> given, GpuInventory inventory) {
        return forNode(given, inventory.backend(), base());
    }

    /**
     * @param given   a directory given explicitly, or empty
     * @param backend the inventory's {@code backend()} ({@code nvml}, {@code simulated:dgx1-v100})
     * @param base    the base directory ({@link #base()})
     * @return where the node's ledger lives
     * @throws LedgerException {@code NOT_A_DIRECTORY} for an empty name given (it would be the working directory)
     */
    public static Path forNode(Optional<Path> given, String backend, Path base) {
        if (given.isPresent()) {
            if (given.get().toString().isEmpty()) {
                throw new LedgerException(LedgerException.Kind.NOT_A_DIRECTORY, given.get(), "the state directory is"
                        + " an empty name, which would put the node ledger in the working directory; give a directory"
                        + " such as /var/lib/gpusched (--state-dir, GPUSCHED_STATE_DIR, gpu.state_dir), or leave it out"
                        + " for the default", null);
            }
            return given.get().toAbsolutePath().normalize();
        }
        if (backend.startsWith(GpuInventories.SIMULATED_PREFIX)) {
            return base.resolve("simulated").resolve(simulatedName(
                    backend.substring(GpuInventories.SIMULATED_PREFIX.length())));
        }
        return base;
    }

    /** @return a directory name for a simulated profile or description file */
    static String simulatedName(String profileOrFile) {
        if (GpuInventories.simulatedProfiles().contains(profileOrFile)) {
            return profileOrFile;
        }
        Path p = Path.of(profileOrFile);
        String file = p.getFileName() == null ? "node" : p.getFileName().toString();
        String stem = file.replaceAll("\\.(ya?ml)$", "").replaceAll("[^A-Za-z0-9._-]", "_")
                .toLowerCase(Locale.ROOT);
        if (stem.isEmpty() || stem.startsWith(".")) {
            stem = "node" + stem;
        }
        if (stem.length() > 64) {
            stem = stem.substring(0, 64);
        }
        try {
            byte[] h = MessageDigest.getInstance("SHA-256").digest(p.toAbsolutePath().normalize().toString()
                    .getBytes(StandardCharsets.UTF_8));
            return stem + "-" + HexFormat.of().formatHex(h, 0, 4);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    /**
     * Whether only this process's user can have written the records of the node ledger in {@code stateDir}: the
     * directory and its {@code ledger} file are this user's and writable by neither group nor others (no state group
     * shares them). Only then may a record name a process for this one to signal or kill: in a shared ledger any
     * member could name any process (root's, another user's), and root's process would end it.
     *
     * @return false when shared, or when it cannot be told (missing, unreadable)
     */
    public static boolean writtenByThisUserAlone(Path stateDir) {
        try {
            Object me = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            for (Path p : new Path[]{stateDir, stateDir.resolve("ledger")}) {
                if (!me.equals(Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS))
                        || ((Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS) & 0022) != 0) {
                    return false;
                }
            }
            return true;
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException | ClassCastException e) {
            return false;
        }
    }

    /**
     * Makes sure {@code dir} is a directory no other user can change: made 0700 when absent; then it must be a
     * directory (not a link) of this process's user, writable by neither group nor others, and every directory above
     * it (and above what a link on the way leads to) root's or this user's and writable by neither group nor others,
     * unless sticky ({@code /tmp}). Otherwise another user could rename or replace what a root service keeps there
     * (its token, job output, lock, records) and have root write through a link or run a second service beside it.
     *
     * @param dir     the directory (absolute)
     * @param setting the setting that named it, for the message (e.g. {@code gpu.service.private_dir})
     * @return {@code dir}
     * @throws GpuException naming the directory or the directory above it that others may change, and what would do
     */
    public static Path requirePrivate(Path dir, String setting) {
        Objects.requireNonNull(setting, "setting");
        Path d = dir.toAbsolutePath().normalize();
        Object me;
        try {
            me = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            Path existing = d;
            while (!Files.exists(existing, LinkOption.NOFOLLOW_LINKS)) {
                existing = existing.getParent(); // the root exists
            }
            // what is above is checked before anything is made there, and again after
            refuseOthersAbove(existing.equals(d) ? d : existing.resolve("x"), existing.equals(d) ? d.toRealPath()
                    : existing.toRealPath().resolve("x"), d, me, setting);
            if (!existing.equals(d)) {
                Files.createDirectories(d, PosixFilePermissions.asFileAttribute(
                        PosixFilePermissions.fromString("rwx------")));
            }
            if (!Files.isDirectory(d, LinkOption.NOFOLLOW_LINKS)) {
                throw new GpuException(setting + ": " + d + " is not a directory (a link or a file); give a"
                        + " directory only this service's user writes, or remove it to have it made (0700)");
            }
            refuseOthers(d, d, me, setting, false);
            refuseOthersAbove(d, d.toRealPath(), d, me, setting);
        } catch (IOException | UnsupportedOperationException | ClassCastException e) {
            throw new GpuException(setting + ": cannot check or make " + d + ": " + e);
        }
        return d;
    }

    /**
     * Whether a user other than root and this process's user could rename, replace or add entries on the way to
     * {@code dir} or in it, so that what this process reads there may be forged, or swapped for a FIFO that hangs the
     * read. The path is walked as the kernel walks it, one name at a time from {@code /}, following every link (and
     * {@code ..} from where a link led): each directory passed through must be root's or this user's and writable by
     * neither group nor others, or sticky (like {@code /tmp}) with the entry taken from it root's or this user's; the
     * directory reached must be root's or this user's and writable by neither group nor others. A name that does not
     * exist yet, in a directory only root and this user may write, is trusted. The read-only counterpart of
     * {@link #requirePrivate}, for a root command that reads files another user may keep (an accounting store).
     *
     * @param dir a directory (relative: from the working directory)
     * @return what others may change, naming the directory, its owner or mode; empty when only root and this user can
     */
    public static Optional<String> othersMayChange(Path dir) {
        Path given = dir.toAbsolutePath();
        try {
            Object me = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            Path root = given.getRoot();
            ArrayDeque<String> names = new ArrayDeque<>();
            given.forEach(n -> names.add(n.toString()));
            Path cur = root;
            int links = 0;
            while (!names.isEmpty()) {
                String name = names.pollFirst();
                if (name.equals(".")) {
                    continue;
                }
                if (name.equals("..")) {
                    cur = cur.getParent() == null ? cur : cur.getParent(); // cur is real: its parent is
                    continue;
                }
                Path next = cur.resolve(name);
                boolean exists = Files.exists(next, LinkOption.NOFOLLOW_LINKS);
                Optional<String> why = entryOthersMayChange(cur, next, exists, given, me);
                if (why.isPresent()) {
                    return why;
                }
                if (!exists) {
                    return Optional.empty(); // nobody but root and this user may make it
                }
                if (Files.isSymbolicLink(next)) {
                    if (++links > 40) {
                        return Optional.of(given + " leads through more than 40 links");
                    }
                    Path target = Files.readSymbolicLink(next);
                    List<String> rest = new ArrayList<>();
                    target.forEach(n -> rest.add(n.toString()));
                    for (int k = rest.size() - 1; k >= 0; k--) {
                        names.addFirst(rest.get(k));
                    }
                    if (target.isAbsolute()) {
                        cur = root;
                    }
                    continue;
                }
                cur = next;
            }
            Object owner = Files.getAttribute(cur, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            int mode = (Integer) Files.getAttribute(cur, "unix:mode", LinkOption.NOFOLLOW_LINKS);
            if (!owner.equals(me) && !Integer.valueOf(0).equals(owner)) {
                return Optional.of(cur + " is owned by uid " + owner + ", who may rename or replace what " + given
                        + " holds");
            }
            if ((mode & 0022) != 0) {
                return Optional.of(cur + " has mode " + Integer.toOctalString(mode & 07777) + ", so group or others"
                        + " may rename or replace what " + given + " holds");
            }
            return Optional.empty();
        } catch (IOException | UnsupportedOperationException | ClassCastException e) {
            return Optional.of("cannot check who may change " + given + ": " + e);
        }
    }

    /** Whether someone other than root and {@code me} may rename, replace or make {@code entry} in {@code dir}. */
    private static Optional<String> entryOthersMayChange(Path dir, Path entry, boolean exists, Path given, Object me)
            throws IOException {
        Object owner = Files.getAttribute(dir, "unix:uid");
        int mode = (Integer) Files.getAttribute(dir, "unix:mode");
        if (!owner.equals(me) && !Integer.valueOf(0).equals(owner)) {
            return Optional.of(dir + " is owned by uid " + owner + ", who may rename or replace what " + given
                    + " holds");
        }
        if ((mode & 0022) == 0) {
            return Optional.empty();
        }
        String m = Integer.toOctalString(mode & 07777);
        if ((mode & 01000) == 0) {
            return Optional.of(dir + " has mode " + m + ", so group or others may rename or replace what " + given
                    + " holds");
        }
        if (!exists) {
            return Optional.of(dir + " has mode " + m + " and " + entry.getFileName() + " is not there yet, so anyone"
                    + " may make it first");
        }
        Object entryOwner = Files.getAttribute(entry, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        if (!entryOwner.equals(me) && !Integer.valueOf(0).equals(entryOwner)) {
            return Optional.of(entry + " is owned by uid " + entryOwner + " in " + dir + " (mode " + m + "), so that"
                    + " user may rename or replace what " + given + " holds");
        }
        return Optional.empty();
    }

    /** Refuses when a directory above {@code below}, or above {@code real} (what it really is), is unsafe. */
    private static void refuseOthersAbove(Path below, Path real, Path dir, Object me, String setting)
            throws IOException {
        for (Path chain : new Path[]{below, real}) {
            for (Path up = chain.getParent(); up != null; up = up.getParent()) {
                if (Files.exists(up)) {
                    refuseOthers(up, dir, me, setting, true);
                }
            }
        }
    }

    private static void refuseOthers(Path p, Path dir, Object me, String setting, boolean above) throws IOException {
        Object owner = Files.getAttribute(p, "unix:uid");
        int mode = (Integer) Files.getAttribute(p, "unix:mode");
        boolean sticky = (mode & 01000) != 0;
        String what = above ? "the directory above it, " + p + "," : "it";
        if (!owner.equals(me) && !Integer.valueOf(0).equals(owner)) {
            throw new GpuException(setting + ": " + dir + " is not private: " + what + " is owned by uid " + owner
                    + ", who may rename or replace what it holds; use a directory owned by uid " + me + " (or root)"
                    + " all the way up");
        }
        if (!above && !owner.equals(me)) {
            throw new GpuException(setting + ": " + dir + " is owned by uid " + owner + ", not by this service's"
                    + " uid " + me + "; chown it, or remove it to have it made");
        }
        if ((mode & 0022) != 0 && !(above && sticky)) {
            throw new GpuException(setting + ": " + dir + " is not private: " + what + " has mode "
                    + Integer.toOctalString(mode & 07777) + ", so group or others may rename or replace what it holds;"
                    + " chmod go-w " + p + (above ? ", or choose a directory elsewhere" : ""));
        }
    }

    /** @return whether this process runs as root (the owner of {@code /proc/self} is the effective user) */
    public static boolean isRoot() {
        try {
            return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException | SecurityException e) {
            return "root".equals(System.getProperty("user.name"));
        }
    }
}
