package io.gpusched.core.host;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuInventory;
import io.gpusched.core.LedgerException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
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

    /** @return whether this process runs as root (the owner of {@code /proc/self} is the effective user) */
    public static boolean isRoot() {
        try {
            return Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"));
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException | SecurityException e) {
            return "root".equals(System.getProperty("user.name"));
        }
    }
}
