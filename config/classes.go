package config

// ACCOUNTS_FILE's classes: the lanes of the process in priority order, and
// the checks of an account's classes, class_rps and reserve_rps against
// them.

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"smsdispatcher/admission"
	"smsdispatcher/config/policy"
)

// Defaults of a class of ACCOUNTS_FILE's classes that leaves max_wait out.
const (
	DefaultFirstMaxWait = policy.FirstMaxWait // the first class's
	DefaultLaterMaxWait = policy.LaterMaxWait // any other's
)

// LoadClasses returns the classes of ACCOUNTS_FILE at path, in priority
// order, under p's settings; nil when the file lists none (p.ClassList's
// default two). It checks the classes only, not the accounts. Any error
// is an *Error for ACCOUNTS_FILE whose one line names the file and the key.
func LoadClasses(p Process, path string) ([]Class, error) {
	l := &accountsLoader{path: path}
	data, err := readSmall(path)
	if err != nil {
		return nil, SettingError("ACCOUNTS_FILE", OneLine(err.Error()))
	}
	f, err := l.decode(data)
	if err != nil {
		return nil, err
	}
	return l.classes(p, f.Classes)
}

// classes checks list, the file's classes, and returns them with their
// defaults: topic sms-<name>, subscription sms-<name>-dispatcher, max_wait
// 1s for the first and 8s for the others. A class named otp or marketing
// takes what it leaves unset from the variables of its name (OTP_TOPIC,
// OTP_SUBSCRIPTION, OTP_MAX_WAIT; MARKETING_*), whose defaults are those.
// nil when the key is left out.
func (l *accountsLoader) classes(p Process, list []classYAML) ([]Class, error) {
	if len(list) == 0 {
		if l.lineOfKey("classes") > 0 {
			return nil, l.fail(l.lineOfKey("classes"), "", "classes", "an empty list would serve nothing: list the classes in priority order, or leave the key out for otp then marketing")
		}
		return nil, nil
	}
	out := make([]Class, 0, len(list))
	names := map[admission.Class]int{}
	topics, subs := map[string]int{}, map[string]int{}
	for i, c := range list {
		key := fmt.Sprintf("classes[%d]", i)
		fail := func(field, format string, args ...any) ([]Class, error) {
			line := l.line(-1, key+"."+field)
			if line == 0 {
				line = l.itemLineOf(key)
			}
			return nil, l.fail(line, "", key+"."+field, format, args...)
		}
		raw := strings.TrimSpace(c.Name)
		name, err := admission.ParseClass(raw)
		switch {
		case raw == "":
			return fail("name", "required: the class's name in metrics, logs and the messages' class (1 to 32 of a-z, 0-9, _ and -)")
		case err != nil:
			return fail("name", "want 1 to 32 of a-z, 0-9, _ and -, got %q", raw)
		case name == "global":
			return fail("name", "global names the account's own rate in the metrics: choose another name")
		}
		if j, ok := names[name]; ok {
			return fail("name", "%s is also classes[%d]: each class once", name, j)
		}
		names[name] = i
		k := Class{Name: name, Topic: strings.TrimSpace(c.Topic), Subscription: strings.TrimSpace(c.Subscription)}
		topic, sub, wait := "sms-"+raw, "sms-"+raw+"-dispatcher", policy.Of(name.String(), i).MaxWait
		switch name {
		case admission.OTP:
			topic, sub, wait = p.OTPTopic, p.OTPSubscription, p.OTPMaxWait
		case admission.Marketing:
			topic, sub, wait = p.MarketingTopic, p.MarketingSubscription, p.MarketingMaxWait
		}
		k.Topic, k.Subscription = cmp.Or(k.Topic, topic), cmp.Or(k.Subscription, sub)
		k.MaxWait = wait
		k.Unsuppressed = c.Suppression != nil && !*c.Suppression
		if v := strings.TrimSpace(c.MaxWait); v != "" {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				return fail("max_wait", "want a duration such as 4s, got %q", v)
			case d <= 0:
				return fail("max_wait", "must be positive, got %v", d)
			case d > maxDuration:
				return fail("max_wait", "must be at most %v, got %v", maxDuration, d)
			}
			k.MaxWait = d
		}
		if k.Sending, err = sending(c); err != nil {
			var ke *keyError
			if errors.As(err, &ke) {
				return fail(ke.key, "class %s: %s", name, ke.msg)
			}
			return nil, err
		}
		if k.Guard, err = guardOf(c.guardYAML, fail); err != nil {
			return nil, err
		}
		switch k.Topic {
		case p.DeadLetterTopic, p.StatusTopic:
			return fail("topic", "%q is the dead-letter or status topic (DEAD_LETTER_TOPIC, STATUS_TOPIC): a class needs a topic of its own", k.Topic)
		}
		switch k.Subscription {
		case p.DeadLetterInspect, StatusInspect:
			return fail("subscription", "%q is the dead-letter or status topic's inspect subscription: a class needs a subscription of its own", k.Subscription)
		}
		if j, ok := topics[k.Topic]; ok {
			return fail("topic", "%q is also the topic of classes[%d]: a class is told by its topic", k.Topic, j)
		}
		if j, ok := subs[k.Subscription]; ok {
			return fail("subscription", "%q is also the subscription of classes[%d]: each class pulls its own", k.Subscription, j)
		}
		topics[k.Topic], subs[k.Subscription] = i, i
		out = append(out, k)
	}
	return out, nil
}

// line is the line of the key at path of account (-1: outside any), 0
// when it is absent.
func (l *accountsLoader) line(account int, path string) int {
	for _, k := range l.keys {
		if k.account == account && k.path == path {
			if k.key != nil {
				return k.key.Line
			}
			return k.value.Line
		}
	}
	return 0
}

// itemLineOf is the line of the first key under path, outside the
// accounts, 0 when there is none.
func (l *accountsLoader) itemLineOf(path string) int {
	for _, k := range l.keys {
		if k.account < 0 && k.key != nil && strings.HasPrefix(k.path, path+".") {
			return k.key.Line
		}
	}
	return 0
}

// classNames lists classes' names, in priority order.
func classNames(classes []Class) []admission.Class {
	out := make([]admission.Class, len(classes))
	for i, c := range classes {
		out[i] = c.Name
	}
	return out
}

// orWords says names as a choice: "otp", "otp or marketing", "otp,
// transactional or marketing".
func orWords(names []admission.Class) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = n.String()
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// servedClasses checks list, an account's classes, against the
// configured ones (all, in priority order), and returns them in priority
// order with the set of them.
func servedClasses(list []string, all []admission.Class) ([]admission.Class, map[admission.Class]bool, error) {
	serves := map[admission.Class]bool{}
	for j, name := range list {
		c := admission.Class(strings.TrimSpace(name))
		key := fmt.Sprintf("classes[%d]", j)
		switch {
		case !slices.Contains(all, c):
			return nil, nil, keyErrorf(key, "want %s, got %q", orWords(all), name)
		case serves[c]:
			return nil, nil, keyErrorf(key, "%s is listed twice", c)
		}
		serves[c] = true
	}
	var out []admission.Class
	for _, c := range all {
		if serves[c] {
			out = append(out, c)
		}
	}
	return out, serves, nil
}

// classRates checks an account's class_rps and reserve_rps (given, by
// class name) against the classes it serves (in priority order, all the
// configured ones) and its target_rps, and returns them by class: the
// ceilings, and the reserves. The first configured class is capped only
// by target_rps; a reserve holds back the classes after its own, so the
// account's last class has none; a ceiling must fit under every reserve
// of the classes before it.
func classRates(classRPS, reserveRPS map[string]float64, served, all []admission.Class, target, marketing float64) (ceil, reserve map[admission.Class]float64, err error) {
	check := func(key string, v float64) error {
		switch {
		case !(v >= admission.MinRPS) || math.IsInf(v, 0):
			return keyErrorf(key, "must be a finite number of at least %v, got %v", admission.MinRPS, v)
		case v > target:
			return keyErrorf(key, "%v is above target_rps (%v)", v, target)
		}
		return nil
	}
	for _, name := range sortedKeys(classRPS) {
		c, key := admission.Class(name), "class_rps."+name
		switch {
		case !slices.Contains(all, c):
			return nil, nil, keyErrorf(key, "unknown class (class_rps takes %s)", strings.Join(strs(all), ", "))
		case policy.Of(name, slices.Index(all, c)).TargetOnly:
			who := c.String()
			if c == admission.OTP {
				who = "OTP"
			}
			return nil, nil, keyErrorf(key, "%s is capped only by target_rps: remove the key", who)
		case !slices.Contains(served, c):
			return nil, nil, keyErrorf(key, "the account does not serve %s (see its classes)", c)
		}
		if err := check(key, classRPS[name]); err != nil {
			return nil, nil, err
		}
		if ceil == nil {
			ceil = map[admission.Class]float64{}
		}
		ceil[c] = classRPS[name]
	}
	for _, name := range sortedKeys(reserveRPS) {
		c, key, v := admission.Class(name), "reserve_rps."+name, reserveRPS[name]
		switch {
		case !slices.Contains(all, c):
			return nil, nil, keyErrorf(key, "unknown class (reserve_rps takes %s)", strings.Join(strs(all), ", "))
		case !slices.Contains(served, c):
			return nil, nil, keyErrorf(key, "the account does not serve %s (see its classes)", c)
		case c == served[len(served)-1]:
			return nil, nil, keyErrorf(key, "%s is the account's last class: no class after it to hold back", c)
		case !(v >= 0) || v >= target:
			return nil, nil, keyErrorf(key, "must be at least 0 and below target_rps (%v), got %v", target, v)
		}
		if reserve == nil {
			reserve = map[admission.Class]float64{}
		}
		reserve[c] = v
	}
	ceiling := func(c admission.Class) float64 {
		if v, ok := ceil[c]; ok {
			return v
		}
		if c == admission.Marketing {
			return marketing
		}
		return target
	}
	for i, c := range served {
		if _, set := ceil[c]; !set && c != admission.Marketing {
			continue // its ceiling is what the reserves before it leave it
		}
		for _, e := range served[:i] {
			room := target - reserve[e]
			if ceiling(c) <= room+1e-9 {
				continue
			}
			if _, set := ceil[c]; set {
				return nil, nil, keyErrorf("class_rps."+c.String(), "%v cannot hold with reserve_rps.%s (%v): the classes after %s share target_rps - %v = %v",
					ceiling(c), e, reserve[e], e, reserve[e], room)
			}
			return nil, nil, keyErrorf("reserve_rps."+e.String(), "%v leaves the classes after %s %v, under %s's ceiling %v: lower the reserve or set class_rps.%s to at most %v",
				reserve[e], e, room, c, ceiling(c), c, room)
		}
	}
	return ceil, reserve, nil
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func strs(classes []admission.Class) []string {
	out := make([]string, len(classes))
	for i, c := range classes {
		out[i] = c.String()
	}
	return out
}

// classesKey is the key of the file an admission.ConfigError of Field
// "Classes" is about: class_rps.<class> or reserve_rps.<class> of the
// class its reason names first, else classes.
func classesKey(reason string) string {
	name, rest, ok := strings.Cut(strings.TrimPrefix(reason, `"`), `"`)
	if !ok || !strings.HasPrefix(reason, `"`) {
		return "classes"
	}
	if strings.HasPrefix(rest, ": Reserve") {
		return "reserve_rps." + name
	}
	return "class_rps." + name
}
