package io.gpusched.core.devices;

import java.nio.file.Path;

/**
 * A device node a GPU job needs (or must not reach).
 *
 * @param path  where it lives on the host ({@code /dev/nvidia1})
 * @param major major number
 * @param minor minor number
 * @param role  what it is: {@code gpu}, {@code control}, {@code uvm}, {@code modeset}, {@code mig-cap}, {@code kfd},
 *              {@code render}, {@code card}
 */
public record DeviceNode(Path path, int major, int minor, String role) {

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
