package io.gpusched.cli.everymember;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A Spark Worker's or a Flink TaskManager's GPU discovery, run in a JVM whose class path is the engine's own jars,
 * the drop-in gpusched jar and this class alone. It touches only the engine's API, by reflection (this class is
 * compiled without the engines): Spark as its Worker does at start ({@code ResourceUtils.getOrDiscoverAllResources}
 * for {@code spark.worker} with the configured discovery plug-in), Flink as its TaskManagerRunner does (the plug-in
 * manager from {@code FLINK_PLUGINS_DIR}, then {@code ExternalResourceUtils
 * .createStaticExternalResourceInfoProviderFromConfig}). It prints {@code MEMBER GRANTED <indices>} or
 * {@code MEMBER REFUSED <why>}, holds what it got until its standard input says {@code EXIT} (or ends), and exits
 * normally, as a stopped Worker or TaskManager does.
 *
 * <p>Arguments: {@code spark|flink <amount> [key=value...]}, the engine's configuration.
 */
public final class EngineMember {
    private EngineMember() {
    }

    /** @param args {@code spark|flink <amount> [key=value...]} */
    public static void main(String[] args) throws Exception {
        String engine = args[0];
        int amount = Integer.parseInt(args[1]);
        Map<String, String> conf = new LinkedHashMap<>();
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            conf.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        List<String> got;
        try {
            got = switch (engine) {
                case "spark" -> spark(amount, conf);
                case "flink" -> flink(amount, conf);
                default -> throw new IllegalArgumentException("engine " + engine + ": expected spark or flink");
            };
        } catch (InvocationTargetException e) {
            System.out.println("MEMBER REFUSED " + messages(e.getCause()));
            System.out.flush();
            System.exit(0);
            return;
        }
        if (got.isEmpty()) {
            System.out.println("MEMBER REFUSED no " + engine + " GPUs (asked for " + amount + ")");
        } else {
            System.out.println("MEMBER GRANTED " + String.join(",", got));
        }
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null && !line.trim().equals("EXIT"); line = in.readLine()) {
            // hold until told to stop
        }
        System.exit(0);
    }

    /** Spark's Worker: its {@code onStart} discovers with {@code getOrDiscoverAllResources(conf, "spark.worker")}. */
    private static List<String> spark(int amount, Map<String, String> settings) throws Exception {
        Class<?> confClass = Class.forName("org.apache.spark.SparkConf");
        Object conf = confClass.getConstructor(boolean.class).newInstance(false);
        Method set = confClass.getMethod("set", String.class, String.class);
        set.invoke(conf, "spark.worker.resource.gpu.amount", String.valueOf(amount));
        for (Map.Entry<String, String> e : settings.entrySet()) {
            set.invoke(conf, e.getKey(), e.getValue());
        }
        Class<?> option = Class.forName("scala.Option");
        Object none = Class.forName("scala.None$").getField("MODULE$").get(null);
        Object resources = Class.forName("org.apache.spark.resource.ResourceUtils")
                .getMethod("getOrDiscoverAllResources", confClass, String.class, option)
                .invoke(null, conf, "spark.worker", none);
        Object gpu = Class.forName("scala.collection.Map").getMethod("get", Object.class).invoke(resources, "gpu");
        if (!(Boolean) option.getMethod("isDefined").invoke(gpu)) {
            return List.of();
        }
        Object info = option.getMethod("get").invoke(gpu);
        return List.of((String[]) info.getClass().getMethod("addresses").invoke(info));
    }

    /** Flink's TaskManagerRunner: plug-ins from {@code FLINK_PLUGINS_DIR}, then the static info provider. */
    private static List<String> flink(int amount, Map<String, String> settings) throws Exception {
        Map<String, String> m = new LinkedHashMap<>(settings);
        m.put("external-resource.gpu.amount", String.valueOf(amount));
        Class<?> confClass = Class.forName("org.apache.flink.configuration.Configuration");
        Object conf = confClass.getMethod("fromMap", Map.class).invoke(null, m);
        Object plugins = Class.forName("org.apache.flink.core.plugin.PluginUtils")
                .getMethod("createPluginManagerFromRootFolder", confClass).invoke(null, conf);
        Object provider = Class.forName("org.apache.flink.runtime.externalresource.ExternalResourceUtils")
                .getMethod("createStaticExternalResourceInfoProviderFromConfig", confClass,
                        Class.forName("org.apache.flink.core.plugin.PluginManager"))
                .invoke(null, conf, plugins);
        Set<?> infos = (Set<?>) Class.forName("org.apache.flink.runtime.externalresource.ExternalResourceInfoProvider")
                .getMethod("getExternalResourceInfos", String.class).invoke(provider, "gpu");
        Method property = Class.forName("org.apache.flink.api.common.externalresource.ExternalResourceInfo")
                .getMethod("getProperty", String.class);
        List<String> out = new ArrayList<>();
        for (Object info : infos) {
            out.add(((Optional<?>) property.invoke(info, "index")).orElseThrow().toString());
        }
        return out;
    }

    private static String messages(Throwable t) {
        StringBuilder b = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            b.append(c.getClass().getName()).append(": ").append(c.getMessage()).append(" | ");
        }
        return b.toString().replaceAll("[\\r\\n]+", " ");
    }
}
