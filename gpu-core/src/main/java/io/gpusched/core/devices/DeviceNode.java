package io.gpusched.core.devices;

import java.nio.file.Path;
import java.util.Objects;
import java.util.OptionalInt;

/**
 * A device node a GPU job needs (or must not reach). Its major may be unknown when it is planned: the {@code
 * nvidia-uvm} module is loaded on demand, and until it is, {@code /proc/devices} has no major for it. Such a node is
 * still needed by every CUDA container, and is named by path alone ({@link #byPath}): a container runtime (CDI, the
 * kubelet's device specs, {@code docker --device}) reads the number from the host's node when it starts the container;
 * only a cgroup rule needs the number, so a fence has no rule for it until the module is loaded.
 *
 * @param path       where it lives on the host ({@code /dev/nvidia1})
 * @param knownMajor major number, when known
 * @param minor      minor number (for a node planned by path, its minor by the driver's convention:
 *                   {@code nvidia-uvm} 0, {@code nvidia-uvm-tools} 1)
 * @param role       what it is: {@code gpu}, {@code control}, {@code uvm}, {@code modeset}, {@code mig-cap},
 *                   {@code kfd}, {@code render}, {@code card}
 */
public record DeviceNode(Path path, OptionalInt knownMajor, int minor, String role) {

    /** @throws IllegalArgumentException for a negative minor or a major outside 0..4095 */
    public DeviceNode {
        Objects.requireNonNull(path, "path");
        Objects.requireNonNull(knownMajor, "knownMajor");
        Objects.requireNonNull(role, "role");
        if (minor < 0) {
            throw new IllegalArgumentException("device minor must be >= 0, was " + minor + " (" + path + ")");
        }
        if (knownMajor.isPresent() && (knownMajor.getAsInt() < 0 || knownMajor.getAsInt() > CharMajors.MAX_MAJOR)) {
            throw new IllegalArgumentException("device major must be 0.." + CharMajors.MAX_MAJOR + ", was "
                    + knownMajor.getAsInt() + " (" + path + ")");
        }
    }

    /**
     * A node whose number is known.
     *
     * @param path  where it lives on the host
     * @param major major number
     * @param minor minor number
     * @param role  what it is
     */
    public DeviceNode(Path path, int major, int minor, String role) {
        this(path, OptionalInt.of(major), minor, role);
    }

    /**
     * A node whose major is not known (its module is not loaded yet): containers get it by path, fences cannot.
     *
     * @param path  where it lives on the host
     * @param minor its minor by the driver's convention
     * @param role  what it is
     * @return the node
     */
    public static DeviceNode byPath(Path path, int minor, String role) {
        return new DeviceNode(path, OptionalInt.empty(), minor, role);
    }

    /** @return whether its major (so its whole number) is known */
    public boolean numbered() {
        return knownMajor.isPresent();
    }

    /**
     * @return the major number
     * @throws IllegalStateException for a node planned by path alone (ask {@link #numbered()} first)
     */
    public int major() {
        if (knownMajor.isEmpty()) {
            throw new IllegalStateException(path + " (" + role + ") has no known major: its module is not loaded,"
                    + " so it is named by path only");
        }
        return knownMajor.getAsInt();
    }

    /**
     * @return whether this is a vendor control node shared by all GPUs ({@code control}, {@code uvm}, {@code modeset},
     * {@code kfd})
     */
    public boolean isControl() {
        return switch (role) {
            case "control", "uvm", "modeset", "kfd" -> true;
            default -> false;
        };
    }
}
