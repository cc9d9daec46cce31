package io.gpusched.cuda.fuzz;

import io.gpusched.cuda.internal.VersionFiles;

/**
 * Fuzz target for the names CUDA is read from in a directory listing: a pip wheel's {@code dist-info} directory
 * ({@link VersionFiles#fromPipDistInfo}) and a runtime library's file name ({@link VersionFiles#fromCudartName}). The
 * input is one name; both readers must give a valid version, empty, or IllegalArgumentException naming the name.
 */
public final class PipMetadataFuzzer {
    private PipMetadataFuzzer() {
    }

    /** One input: a file or directory name. */
    public static void fuzzerTestOneInput(byte[] input) {
        String s = CudaContract.text(input);
        CudaContract.version(s, s, () -> VersionFiles.fromPipDistInfo(s));
        CudaContract.version(s, s, () -> VersionFiles.fromCudartName(s));
        if (VersionFiles.isCudartName(s)) {
            CudaContract.version(s, s, () -> VersionFiles.fromCudartName(s));
        }
    }
}
