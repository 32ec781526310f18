"""Recall in Chinese, Japanese and Korean: is the turn a question is about in the top k?

36 owner turns (12 a language, each a personal fact written the way people write it,
without spaces in Chinese and Japanese, with particles attached in Korean) are imported
into a home beside an English haystack (the sessions of one LongMemEval question, about
450 turns), and 36 questions are asked, each about one turn, sharing words with it but
never the whole unspaced run. Figures: hit@1 and hit@5 per language, for tether's recall
and, in the same run, for the baseline: the same home and questions with the CJK
bigrams switched off (what recall did before: a run is one token).

    .venv/bin/python benchmarks/cjk_recall.py
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tether.config import Config
from tether.core.recall import cjk
from tether.home import init_home
from tether.imports.jsonl import import_jsonl
from tether.memory.recall import recall
from tether.stores.sqlite import SqliteStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench-data" / "longmemeval"
NOW = datetime(2026, 11, 1, tzinfo=UTC)

#: (language, what the owner said, a question about it)
FACTS: tuple[tuple[str, str, str], ...] = (
    ("zh", "我最喜欢的茶是乌龙茶，每天早上都喝一杯。", "我平时喝什么茶？"),
    ("zh", "上个月我们在北京吃了烤鸭，味道非常好。", "我们在哪里吃的烤鸭？"),
    ("zh", "我女儿的钢琴老师姓王，每周六上课。", "钢琴老师叫什么？"),
    ("zh", "我的自行车是去年在上海买的，蓝色的。", "自行车是在哪儿买的？"),
    ("zh", "我对花生过敏，所以不吃花生酱。", "我对什么过敏？"),
    ("zh", "我们家的狗叫豆豆，今年三岁了。", "我家狗的名字是什么"),
    ("zh", "明年春天我打算去云南旅游。", "我计划去哪里旅游？"),
    ("zh", "我的护照号码放在书房的抽屉里。", "护照放在哪里了？"),
    ("zh", "公司的年会定在十二月十八号。", "年会是哪一天？"),
    ("zh", "我哥哥在深圳做软件工程师。", "哥哥做什么工作"),
    ("zh", "我每周三晚上去游泳馆游泳。", "我什么时候去游泳？"),
    ("zh", "冰箱里的牛奶明天就过期了。", "牛奶什么时候过期"),
    ("ja", "来週の月曜日に東京で友達に会います。", "東京で誰に会いますか"),
    ("ja", "猫の名前はミロです。とても可愛いです。", "猫の名前は何ですか"),
    ("ja", "毎朝ジョギングをしてから会社に行きます。", "ジョギングはいつしますか"),
    ("ja", "妹の誕生日は三月十五日です。", "妹の誕生日はいつ"),
    ("ja", "新しいカメラを京都で買いました。", "カメラはどこで買いましたか"),
    ("ja", "私はそばよりうどんが好きです。", "うどんとそば、どちらが好き？"),
    ("ja", "車の鍵は玄関の棚に置いてあります。", "鍵はどこに置いた？"),
    ("ja", "週末は図書館で勉強することが多いです。", "週末はどこで勉強しますか"),
    ("ja", "父は大阪の病院で医者をしています。", "父の仕事は何ですか"),
    ("ja", "来月、北海道へスキーに行く予定です。", "スキーはどこへ行きますか"),
    ("ja", "歯医者の予約は木曜日の午後三時です。", "歯医者の予約はいつですか"),
    ("ja", "庭にトマトとキュウリを植えました。", "庭に何を植えましたか"),
    ("ko", "주말에 서울에서 친구를 만났어요.", "서울에서 누구를 만났어?"),
    ("ko", "우리 강아지 이름은 초코예요.", "강아지 이름이 뭐였지?"),
    ("ko", "저는 매일 아침 커피를 두 잔 마셔요.", "커피를 하루에 몇 잔 마셔?"),
    ("ko", "다음 달에 부산으로 이사할 예정이에요.", "어디로 이사해?"),
    ("ko", "제 동생은 대학교에서 화학을 공부해요.", "동생이 공부하는 것은?"),
    ("ko", "자전거를 타고 회사에 출근해요.", "회사에 어떻게 출근해?"),
    ("ko", "어머니 생신은 칠월 이일이에요.", "어머니 생신이 언제야?"),
    ("ko", "김치찌개를 제일 좋아해요.", "좋아하는 음식은 김치찌개?"),
    ("ko", "여권은 책상 서랍에 넣어 뒀어요.", "여권을 어디에 뒀지?"),
    ("ko", "토요일마다 테니스를 쳐요.", "테니스는 언제 쳐?"),
    ("ko", "제주도에서 귤을 한 상자 샀어요.", "귤은 어디서 샀어?"),
    ("ko", "치과 예약은 금요일 오후예요.", "치과 예약이 언제야?"),
)
KS = (1, 5)


def _lines() -> list[bytes]:
    """The import file: the CJK turns (one session a language) and the English haystack."""
    lines: list[bytes] = []
    for n, (language, said, _) in enumerate(FACTS):
        stamp = (NOW - timedelta(days=30) + timedelta(minutes=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for role, text in (("user", said), ("assistant", "OK.")):
            line = {"session": f"cjk-{language}", "role": role, "text": text, "time": stamp}
            lines.append(json.dumps(line, ensure_ascii=False).encode())
    source = DATA / "longmemeval_s_subset100.json"
    if source.is_file():
        question = json.loads(source.read_text())[0]
        for s, (date, messages) in enumerate(
            zip(question["haystack_dates"], question["haystack_sessions"], strict=True)
        ):
            start = datetime.strptime(date.split(" (")[0], "%Y/%m/%d").replace(tzinfo=UTC)
            for m, message in enumerate(messages):
                stamp = (start + timedelta(seconds=m)).strftime("%Y-%m-%dT%H:%M:%SZ")
                line = {
                    "session": f"en-{s:03d}",
                    "role": message["role"],
                    "text": message["content"],
                    "time": stamp,
                }
                lines.append(json.dumps(line).encode())
    return lines


def _run(lines: list[bytes]) -> dict[str, dict[int, float]]:
    """Hit rates per language at each k, for a freshly built home."""
    with tempfile.TemporaryDirectory(prefix="tether-cjk-") as tmp:
        home = Path(tmp) / "home"
        init_home(home)
        src = Path(tmp) / "in.jsonl"
        src.write_bytes(b"\n".join(lines) + b"\n")
        with SqliteStore(home / "tether.db") as store:
            import_jsonl(home, src, now=NOW, config=Config(), store=lambda: nullcontext(store))
            turns: dict[str, int] = {}
            hits: dict[str, dict[int, int]] = {}
            for language, _, asked in FACTS:
                turns[language] = turns.get(language, 0) + 1
                found = recall(store, asked, max(KS), time=NOW)
                rank = next(
                    (
                        i
                        for i, h in enumerate(found)
                        if h.session == f"cjk-{language}" and h.turn == turns[language]
                    ),
                    None,
                )
                per = hits.setdefault(language, dict.fromkeys(KS, 0))
                for k in KS:
                    per[k] += rank is not None and rank < k
    return {lang: {k: n / turns[lang] for k, n in per.items()} for lang, per in hits.items()}


def _without_bigrams(run: Callable[[], dict[str, dict[int, float]]]) -> dict[str, dict[int, float]]:
    saved = cjk.segment, cjk.has_cjk

    def no_segment(text: str) -> str | None:  # noqa: ARG001
        return None

    def no_cjk(text: str) -> bool:  # noqa: ARG001
        return False

    cjk.segment, cjk.has_cjk = no_segment, no_cjk
    try:
        return run()
    finally:
        cjk.segment, cjk.has_cjk = saved


def main() -> None:
    lines = _lines()
    turns = sum(1 for line in lines if json.loads(line)["role"] == "user")
    start = time.perf_counter()
    ours = _run(lines)
    baseline = _without_bigrams(lambda: _run(lines))
    for language in ours:
        for k in KS:
            print(
                json.dumps(
                    {
                        "figure": f"cjk_hit@{k}",
                        "language": language,
                        "questions": sum(1 for f in FACTS if f[0] == language),
                        "value": round(ours[language][k], 3),
                        "baseline": "the same recall with CJK bigrams off (a run is one token)",
                        "baseline_value": round(baseline[language][k], 3),
                        "haystack_turns": turns,
                    }
                )
            )
    print(json.dumps({"figure": "run", "wall_s": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
