package io.gpusched.cuda;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

/** Builds CUDA installation trees the way the real installers lay them out (files are empty stand-ins). */
final class CudaFixtures {
    private CudaFixtures() {
    }

    static Path file(Path p, String content) throws IOException {
        Files.createDirectories(p.getParent());
        return Files.writeString(p, content);
    }

    static Path exe(Path p) throws IOException {
        file(p, "#!/bin/sh\n");
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        return p;
    }

    static void link(Path link, String target) throws IOException {
        Files.createDirectories(link.getParent());
        Files.createSymbolicLink(link, Path.of(target));
    }

    /** A host root with CUDA 10.2, 11.8, 12.4 (+compat, + /usr/local/cuda alias), a header-only 12.2, a broken one. */
    static Path host(Path root) throws IOException {
        Path local = root.resolve("usr/local");
        Path c102 = local.resolve("cuda-10.2");
        file(c102.resolve("version.txt"), "CUDA Version 10.2.89\n");
        file(c102.resolve("lib64/libcudart.so.10.2.89"), "");
        link(c102.resolve("lib64/libcudart.so.10.2"), "libcudart.so.10.2.89");
        exe(c102.resolve("bin/nvcc"));

        Path c118 = local.resolve("cuda-11.8");
        file(c118.resolve("version.json"), "{\"cuda\": {\"name\": \"CUDA SDK\", \"version\": \"11.8.20220929\"},"
                + " \"cuda_cudart\": {\"name\": \"CUDA Runtime (cudart)\", \"version\": \"11.8.89\"}}");
        file(c118.resolve("targets/x86_64-linux/lib/libcudart.so.11.8.89"), "");
        link(c118.resolve("targets/x86_64-linux/lib/libcudart.so.11.0"), "libcudart.so.11.8.89");
        file(c118.resolve("targets/x86_64-linux/lib/libcublas.so.11"), "");
        link(c118.resolve("lib64"), "targets/x86_64-linux/lib");
        exe(c118.resolve("bin/nvcc"));

        Path c124 = local.resolve("cuda-12.4");
        file(c124.resolve("version.json"), "{\"cuda\": {\"name\": \"CUDA SDK\", \"version\": \"12.4.1\"},"
                + " \"cuda_cudart\": {\"name\": \"CUDA Runtime (cudart)\", \"version\": \"12.4.127\"}}");
        file(c124.resolve("lib64/libcudart.so.12.4.127"), "");
        link(c124.resolve("lib64/libcudart.so.12"), "libcudart.so.12.4.127");
        file(c124.resolve("lib64/libcublas.so.12"), "");
        file(c124.resolve("compat/libcuda.so.550.54.15"), "");
        link(c124.resolve("compat/libcuda.so.1"), "libcuda.so.550.54.15");
        exe(c124.resolve("bin/nvcc"));
        link(local.resolve("cuda"), "cuda-12.4");

        Path c122 = local.resolve("cuda-12.2");
        file(c122.resolve("include/cuda.h"), "/* header */\n#define CUDA_VERSION 12020\n");

        Path broken = local.resolve("cuda-12.8");
        file(broken.resolve("version.json"), "{not json");
        file(broken.resolve("include/cuda.h"), "#define CUDA_VERSION 12080\n");
        link(local.resolve("cuda-9.9"), "/nonexistent/cuda-9.9");
        Files.createDirectories(local.resolve("cuda-empty/share"));
        return root;
    }

    /** A pip CUDA 12 layout: site-packages/nvidia/cuda_runtime/lib with the wheel's dist-info beside nvidia/. */
    static Path pip12(Path root) throws IOException {
        Path site = root.resolve("venv/lib/python3.11/site-packages");
        file(site.resolve("nvidia/cuda_runtime/lib/libcudart.so.12"), "");
        file(site.resolve("nvidia_cuda_runtime_cu12-12.1.105.dist-info/METADATA"), "Name: nvidia-cuda-runtime-cu12\n"
                + "Version: 12.1.105\n");
        return site.resolve("nvidia");
    }
}
