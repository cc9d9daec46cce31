package io.gpusched.isolation;

import java.nio.file.Path;

/**
 * A device node a GPU job needs (or must not reach).
 *
 * @param path  where it lives on the host ({@code /dev/nvidia1})
 * @param major major number
 * @param minor minor number
 * @param role  what it is: {@code gpu}, {@code control}, {@code uvm}, {@code modeset}, {@code mig-cap}, {@code kfd},
 *              {@code render}
 */
public record DeviceNode(Path path, int major, int minor, String role) {
}
