package io.gpusched.core.internal;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The NVIDIA kernel driver's version as {@code /proc/driver/nvidia/version} states it. Shared by the NVML backend's
 * procfs fallback, the CUDA resolver and the console's doctor view, which must not depend on a backend module.
 * Internal: exported only to those modules (see gpu-core's {@code module-info.java}).
 */
public final class NvidiaDriver {

    private static final Pattern BANNER =
            Pattern.compile("NVRM version:.*?Kernel Module(?:\\s+for\\s+\\S+)?\\s+([0-9]+\\.[0-9]+(?:\\.[0-9]+)?)");

    private NvidiaDriver() {
    }

    /**
     * Parses both banner formats: {@code NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 …}
     * and {@code NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build …}.
     *
     * @return the version, or empty when the text has no banner
     */
    public static Optional<String> parseBanner(String text) {
        Matcher m = BANNER.matcher(text);
        return m.find() ? Optional.of(m.group(1)) : Optional.empty();
    }

    /** @return the loaded driver's version from {@code <procRoot>/driver/nvidia/version}; empty when not loaded */
    public static Optional<String> loadedVersion(Path procRoot) {
        try {
            return parseBanner(Files.readString(procRoot.resolve("driver/nvidia/version")));
        } catch (IOException e) {
            return Optional.empty();
        }
    }
}
