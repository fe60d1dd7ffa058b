package io.logbroker.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The batch-read options of {@code logbroker-segments}, named and checked as the Python
 * {@code logbroker} source checks them ({@code spark_connector/options.py}), on the driver, before
 * anything is read: an unknown name, a missing {@code topic} or {@code path}, or a malformed value
 * raises {@link IllegalArgumentException} naming the option, what was given and what is accepted.
 */
public record ReadOptions(String topic, List<String> dataDirs, OffsetPlan.Spec starting, OffsetPlan.Spec ending,
                          Long startingTimestamp, boolean failOnDataLoss, int minPartitions, String keysFile)
        implements Serializable {
    static final Set<String> KNOWN = Set.of("topic", "path", "startingoffsets", "endingoffsets", "startingtimestamp",
            "failondataloss", "minpartitions", "encryptionkeysfile");
    static final Set<String> SPARK_SET = Set.of("checkpointlocation", "__checkpointlocation", "queryname");
    static final Set<String> HTTP_ONLY = Set.of("url", "token", "username", "password", "timeoutseconds");
    static final Map<String, String> DISPLAY = Map.of("startingoffsets", "startingOffsets", "endingoffsets",
            "endingOffsets", "startingtimestamp", "startingTimestamp", "failondataloss", "failOnDataLoss",
            "minpartitions", "minPartitions", "encryptionkeysfile", "encryptionKeysFile");
    static final int TOPIC_CHARS_MAX = 200;

    public static ReadOptions parse(Map<String, String> given) {
        Map<String, String> opts = new TreeMap<>();
        given.forEach((k, v) -> {
            String key = k.toLowerCase(Locale.ROOT);
            if (!SPARK_SET.contains(key)) {
                opts.put(key, v);
            }
        });
        for (String key : opts.keySet()) {
            if (HTTP_ONLY.contains(key)) {
                throw new IllegalArgumentException("the logbroker-segments source reads segment files from path; " + key
                        + " is for reading over HTTP: use format(\"logbroker\") with url");
            }
        }
        TreeSet<String> unknown = new TreeSet<>(opts.keySet());
        unknown.removeAll(KNOWN);
        if (!unknown.isEmpty()) {
            TreeSet<String> names = new TreeSet<>();
            KNOWN.forEach(k -> names.add(DISPLAY.getOrDefault(k, k)));
            throw new IllegalArgumentException("unknown option(s) for reading: " + String.join(", ", unknown)
                    + "; known: " + String.join(", ", names));
        }
        String topic = topic(opts);
        List<String> dirs = dataDirs(opts);
        Long timestamp = optionalLong(opts, "startingtimestamp", 0);
        if (timestamp != null && opts.containsKey("startingoffsets")) {
            throw new IllegalArgumentException("give either startingOffsets or startingTimestamp, not both");
        }
        OffsetPlan.Spec starting = offsets(opts, "startingoffsets", topic, "earliest", true);
        OffsetPlan.Spec ending = offsets(opts, "endingoffsets", topic, "latest", false);
        Long minPartitions = optionalLong(opts, "minpartitions", 1);
        if (minPartitions != null && minPartitions > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("minPartitions must be at most " + Integer.MAX_VALUE + ", not " + minPartitions);
        }
        String keysFile = opts.getOrDefault("encryptionkeysfile", "").strip();
        return new ReadOptions(topic, dirs, starting, ending, timestamp, bool(opts, "failondataloss", true),
                minPartitions == null ? 0 : minPartitions.intValue(), keysFile.isEmpty() ? null : keysFile);
    }

    private static String topic(Map<String, String> opts) {
        String topic = opts.getOrDefault("topic", "");
        if (topic.isEmpty()) {
            throw new IllegalArgumentException("the option topic is required (the topic to read)");
        }
        boolean valid = topic.length() <= TOPIC_CHARS_MAX && !topic.equals(".") && !topic.equals("..")
                && topic.chars().allMatch(c -> c < 128 && (Character.isLetterOrDigit(c) || c == '.' || c == '_' || c == '-'));
        if (!valid) {
            throw new IllegalArgumentException("topic '" + topic + "' is not a valid topic name ([A-Za-z0-9._-], at most "
                    + TOPIC_CHARS_MAX + " characters)");
        }
        return topic;
    }

    private static List<String> dataDirs(Map<String, String> opts) {
        String path = opts.getOrDefault("path", "");
        if (path.isEmpty()) {
            throw new IllegalArgumentException("say where the records are: path (the broker's data directories, "
                    + "comma-separated)");
        }
        List<String> dirs = new ArrayList<>();
        for (String part : path.split(",")) {
            if (!part.strip().isEmpty()) {
                dirs.add(part.strip());
            }
        }
        if (dirs.isEmpty()) {
            throw new IllegalArgumentException("path '" + path + "' names no directory");
        }
        return List.copyOf(dirs);
    }

    private static OffsetPlan.Spec offsets(Map<String, String> opts, String name, String topic, String fallback,
                                           boolean allowEarliest) {
        String text = opts.getOrDefault(name, fallback).strip();
        String display = DISPLAY.get(name);
        if (text.equals("latest")) {
            return OffsetPlan.Spec.of(OffsetPlan.LATEST);
        }
        if (text.equals("earliest")) {
            if (!allowEarliest) {
                throw new IllegalArgumentException(display + " cannot be earliest (that would read nothing); use latest or JSON");
            }
            return OffsetPlan.Spec.of(OffsetPlan.EARLIEST);
        }
        return new OffsetPlan.Spec(0, parseOffsetsJson(text, topic, display, allowEarliest));
    }

    /** {@code {"<topic>": {"<partition>": offset}}} with -2 for earliest and -1 for latest. */
    static SortedMap<Integer, Long> parseOffsetsJson(String text, String topic, String display, boolean allowEarliest) {
        String shape = "earliest, latest or JSON such as {\"" + topic + "\": {\"0\": 23, \"1\": -2}} (-2 earliest, -1 latest)";
        JsonNode parsed;
        try {
            parsed = new ObjectMapper().readTree(text);
        } catch (Exception e) {
            throw new IllegalArgumentException(display + " must be " + shape + ", not '" + text + "'");
        }
        if (parsed == null || !parsed.isObject() || parsed.size() != 1 || !parsed.has(topic) || !parsed.get(topic).isObject()) {
            throw new IllegalArgumentException(display + " must be " + shape + " naming exactly the topic '" + topic
                    + "', not '" + text + "'");
        }
        SortedMap<Integer, Long> out = new TreeMap<>();
        for (Map.Entry<String, JsonNode> field : parsed.get(topic).properties()) {
            String key = field.getKey();
            JsonNode value = field.getValue();
            boolean digits = !key.isEmpty() && key.length() < 10 && key.chars().allMatch(c -> c >= '0' && c <= '9');
            if (!digits || !value.isIntegralNumber() || !value.canConvertToLong()) {
                throw new IllegalArgumentException(display + ": partition '" + key + "' -> " + value
                        + " must be a partition number -> an offset");
            }
            long offset = value.asLong();
            if (offset < OffsetPlan.EARLIEST || (offset == OffsetPlan.EARLIEST && !allowEarliest)) {
                throw new IllegalArgumentException(display + ": offset " + offset + " for partition " + key
                        + " is not allowed here");
            }
            out.put(Integer.parseInt(key), offset);
        }
        return out;
    }

    private static Long optionalLong(Map<String, String> opts, String name, long low) {
        String text = opts.get(name);
        if (text == null) {
            return null;
        }
        String display = DISPLAY.getOrDefault(name, name);
        long value;
        try {
            value = Long.parseLong(text.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(display + " must be an integer, not '" + text + "'");
        }
        if (value < low) {
            throw new IllegalArgumentException(display + " must be at least " + low + ", not " + value);
        }
        return value;
    }

    private static boolean bool(Map<String, String> opts, String name, boolean fallback) {
        String text = opts.get(name);
        if (text == null) {
            return fallback;
        }
        String t = text.strip().toLowerCase(Locale.ROOT);
        if (t.equals("true") || t.equals("false")) {
            return t.equals("true");
        }
        throw new IllegalArgumentException(DISPLAY.getOrDefault(name, name) + " must be true or false, not '" + text + "'");
    }
}
