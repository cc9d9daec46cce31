package io.gpusched.cuda;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * Which NVIDIA GPUs are data-centre parts, on which CUDA forward compatibility is supported. The judgement is data:
 * the model list {@code io/gpusched/cuda/data-center-gpus.txt} (A2, A10, A10G, A16, A30, A40, A100, H100, H200, H20,
 * L4, L40, L40S, B200, GB200, ... and every "Tesla"), matched word by word against the name the driver reports.
 */
public final class DataCenterGpus {

    private static final List<List<String>> MODELS = load();

    private DataCenterGpus() {
    }

    /** @return the models in the list, each as its words in upper case */
    public static List<List<String>> models() {
        return MODELS;
    }

    /**
     * @param name the name NVML or nvidia-smi reports, e.g. {@code "NVIDIA A10G"} or {@code "Tesla V100-SXM2-16GB"}
     * @return true if a listed model's words appear in a row among the name's words, and the name is no GeForce or
     *         TITAN
     */
    public static boolean isDataCenter(String name) {
        List<String> words = words(name);
        if (words.contains("GEFORCE") || words.contains("TITAN")) {
            return false;
        }
        for (List<String> model : MODELS) {
            if (Collections.indexOfSubList(words, model) >= 0) {
                return true;
            }
        }
        return false;
    }

    private static List<String> words(String s) {
        return Arrays.stream(s.toUpperCase(Locale.ROOT).split("[\\s\\-_/()]+")).filter(w -> !w.isEmpty()).toList();
    }

    private static List<List<String>> load() {
        String resource = "/io/gpusched/cuda/data-center-gpus.txt";
        List<List<String>> out = new ArrayList<>();
        try (InputStream in = DataCenterGpus.class.getResourceAsStream(resource);
             BufferedReader r = new BufferedReader(new InputStreamReader(
                     Objects.requireNonNull(in, resource), StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null;) {
                String t = line.strip();
                if (!t.isEmpty() && !t.startsWith("#")) {
                    out.add(words(t));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + resource, e);
        }
        return List.copyOf(out);
    }
}
