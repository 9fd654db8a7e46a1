"""The word pools the fake servers' answers are drawn from: fixed data, no faker at run time.

Taken once from Faker 40.63.0 (https://github.com/joke2k/faker, MIT License,
Copyright (c) 2012 Daniele Faraglia): its en_US lorem words, the non-ASCII single words of
its fr_FR lorem words, its ja_JP and zh_CN lorem words, and every 13th of its emoji. Faker
itself is not a dependency: its pytest plugin would load into every pytest process of
a user who installs the kit, and building its locales cost every run a tenth of a second.
"""

from __future__ import annotations

import random

__all__ = ["ACCENTED", "CHINESE", "EMOJI", "JAPANESE", "PLAIN", "draw"]


def _pool(text: str) -> tuple[str, ...]:
    """The words of ``text``, split on white space (some emoji are ZWJ sequences)."""
    return tuple(text.split())


# 971 ASCII words (Faker's en_US lorem words)
PLAIN = _pool(
    """
    a ability able about above accept according account across act action activity actually
    add address administration admit adult affect after again against age agency agent ago
    agree agreement ahead air all allow almost alone along already also although always
    American among amount analysis and animal another answer any anyone anything appear
    apply approach area argue arm around arrive art article artist as ask assume at attack
    attention attorney audience author authority available avoid away baby back bad bag ball
    bank bar base be beat beautiful because become bed before begin behavior behind believe
    benefit best better between beyond big bill billion bit black blood blue board body book
    born both box boy break bring brother budget build building business but buy by call
    camera campaign can candidate capital car card care career carry case catch cause cell
    center central century certain certainly chair challenge chance change character charge
    check child choice choose church citizen city civil claim class clear clearly close
    coach cold collection college color commercial common community company compare computer
    concern condition conference Congress consider consumer contain continue control cost
    could country couple course court cover create crime cultural culture cup current
    customer cut dark data daughter day deal debate decade decide decision deep defense
    degree Democrat democratic describe design despite detail determine develop development
    difference different difficult dinner direction director discover discuss discussion do
    doctor dog door down draw dream drive drop drug during each early east easy eat economic
    economy edge education effect effort eight either election else employee end energy
    enjoy enough enter entire environment environmental especially establish even evening
    event ever every everybody everyone everything evidence exactly example executive exist
    expect experience expert explain eye face fact factor fall family far fast father fear
    federal feel feeling few field fight figure fill film final finally financial find fine
    finish fire firm first fish five floor fly focus follow food foot for force foreign
    forget form former forward four free friend from front full fund future game garden gas
    general generation get girl give glass go goal good government great green ground group
    grow growth guess gun guy hair half hand happen happy hard have he head health hear
    heart heavy help her here herself high him himself his history hit hold home hope
    hospital hot hotel hour house how however huge human hundred husband I idea identify if
    image imagine impact important improve in include including increase indeed indicate
    individual industry information inside instead institution interest interesting
    international interview into investment involve issue it item its itself job join just
    keep key kid kind kitchen know knowledge land language large last late later laugh law
    lawyer lay lead leader learn least leave left leg less let letter level life light like
    likely line list listen little live local long look lose loss lot low machine magazine
    main maintain major majority make man manage management manager many market marriage
    material matter may maybe me mean measure media medical meet meeting member memory
    mention message method middle might military million mind minute miss mission model
    modern moment money month more morning most mother mouth move movement movie Mr Mrs much
    music must my myself name nation national natural nature near nearly necessary need
    network never new news newspaper next nice night no none nor north not note nothing
    notice now number occur of off offer office officer official often oil ok old on once
    one only onto open operation opportunity option or order organization other others our
    out outside over own owner page painting paper parent part participant particular
    particularly partner party pass past pattern pay peace people per perform performance
    perhaps person personal phone physical pick picture piece place plan plant play player
    PM point police policy political politics poor popular population position positive
    possible power practice prepare present president pressure pretty prevent price probably
    process produce product production professional professor program project property
    protect prove provide public pull purpose push put quality question quickly quite race
    radio raise range rate rather reach read ready real reality realize really reason
    receive recent recently recognize record red reduce reflect region relate relationship
    religious remain remember report represent Republican require research resource respond
    response responsibility rest result return reveal rich right rise risk road rock role
    room rule run safe same save say scene school science scientist score sea season seat
    second section security see seek seem sell send senior sense series serious serve
    service set seven several shake share she short should shoulder show side sign
    significant similar simple simply since sing single sister sit site situation six size
    skill skin small smile so social society soldier some somebody someone something
    sometimes son song soon sort sound source south southern space speak special specific
    speech spend sport spring staff stage stand standard star start state statement station
    stay step still stock stop store story strategy street strong structure student study
    stuff style subject success successful such suddenly suffer suggest summer support sure
    surface system table take talk task tax teach teacher team technology television tell
    ten tend term test than thank that the their them themselves then theory there these
    they thing think third this those though thought thousand threat three through
    throughout throw thus time to today together tonight too top total tough toward town
    trade traditional training travel treat treatment tree trial trip trouble true truth try
    turn TV two type under understand unit until up upon us use usually value various very
    view visit voice vote wait walk wall want war watch water way we wear week weight well
    west western what whatever when where whether which while white who whole whom whose why
    wide wife will win wind window wish with within without woman wonder word work worker
    world worry would write writer wrong yard yeah year yes yet you young your yourself
"""
)

# 242 words with accents (the non-ASCII single words of Faker's fr_FR lorem words)
ACCENTED = _pool(
    """
    à âgé âge âme année apparaître après armée arrêter arrière arrivée auprès aussitôt
    autorité beauté bête bientôt brûler ça caractère céder chaîne colère complètement
    connaître considérer côte côté coûter créer curiosité début déchirer décider déclarer
    découvrir décrire défaut défendre dégager déjà delà départ dépasser déposer derrière dès
    désert désespoir désigner désir désirer désormais détacher détail détruire différent
    disparaître drôle écarter échapper éclairer éclat éclater école écouter écraser écrire
    égal également élément élever éloigner émotion empêcher énergie énorme entraîner entrée
    épais épaule époque éprouver espèce espérer établir étage étaler état été éteindre
    étendre étendue éternel étoile étonner étouffer étrange étranger être étroit étude
    étudier événement éviter exécuter expérience façon fenêtre fête fidèle forêt français
    françois frère fumée garçon général goût grâce guère haïr hésiter hôtel idée île
    inquiéter inquiétude intéresser intérêt intérieur journée là léger lèvre liberté lumière
    maître malgré marché matière médecin mêler même mémoire mériter métier moitié naître
    nécessaire obéir où paraître passé paupière pénétrer pensée père pièce pitié plutôt
    poésie poète posséder poussière précéder précieux précipiter précis préférer préparer
    près présence présent présenter président prêt prétendre prêter prévenir prévoir prière
    problème profondément protéger qualité réalité réclamer reconnaître réduire réel
    réfléchir réflexion règle répandre répéter répondre réponse représenter réserver
    résistance résister résoudre résultat réunir réussir rêve réveiller révéler rêver
    révolution rôle santé scène secrétaire séparer sérieux siècle siège société soirée
    succès supérieur sûr système tâche tantôt témoin tempête tête théâtre tôt traîner très
    trésor troisième véritable vérité vêtement vêtir voilà volonté
"""
)

# 218 Japanese words (Faker's ja_JP lorem words)
JAPANESE = _pool(
    """
    コミュニティ 隠す 葉 陶器 錯覚 バーゲン リニア コーラス 仕上げ 叔父 移動 差別する 極端な
    数字 テント 必要 主人 電池 ソース 野球 ストレージ スキーム 暖かい ささやき 器官
    トリビュート 同行 ジャム パン 索引 トス 織る パーセント 拡張 教授 バスケット 創傷
    フレーム 明らかにする フェミニスト 発生する 怒り ボトル 狐 柔らかい リフト バス 雪 画面
    パイオニア マリン ダイヤモンド 普通の 意図 ヘア 日曜日 プラスチック 衝突 評議会 主婦
    保証金 動物 参加する 教会 コミュニケーション 憲法 本質的な 探査 呼ぶ 供給 スペル
    再現する 合計 ダッシュ 擁する 知覚 シェービング コンペ オークション 細かい ニュース 癌
    トーン チーズ 反射 ブランチ コピー 状況 スマッシュ 式 協力 管理する 文言 編組 ジャーナル
    腐った 見落とす ハードウェア ピック 感謝する 楽しんで 人形 建築 見出し タワー ホイール
    省略 ログ 助けて 不自然な 出演者 転倒 運 障害 クルー 追放する 月 カレッジ 緩む 分割 欠乏
    通行料金 電話 狭い 中央 埋め込む 革新 ブレーキ コーナー 溝 脊椎 ブラケット 戦略的 尿
    血まみれの 尊敬する 催眠術 アクセルペダル 厳しい サンプル 奨励します 指名 クール クロス
    ヒール 敵対的な 近代化する 部隊 目的 保持する 中世 デッド ノート デフォルト 犯罪者
    キャビン 副 改善 職人 シュガー 花嫁 倫理 偏差 販売 軸 サラダ 品質 風景 虐待 立派な
    ベルベット ハンマー キャビネット トレーナー リハビリ サワー 連続 学生 高い 賞賛する 行進
    ダニ 証言する 符号 バナー バケツ カラム 装置 ヒット 敵 トースト 試してみる 大統領 屋根裏
    メニュー 残る リンク 舗装 インチ 特徴 は 持つ 持っていました あった ない 今 今日
    持ってる 午前 私 君は 彼 彼女 それ 自体 あなた自身 じぶんの 鉱山
"""
)

# 344 Chinese words (Faker's zh_CN lorem words)
CHINESE = _pool(
    """
    一个 我们 时间 中国 可以 公司 没有 信息 下载 软件 注册 自己 产品 工作 论坛 企业 这个
    他们 管理 已经 问题 内容 使用 进行 市场 服务 如果 系统 技术 发展 现在 作者 就是 网络
    提供 相关 我的 文章 方式 电话 发表 所有 时候 因为 北京 有限 什么 还是 开始 本站 发布
    支持 在线 国家 生活 联系 积分 主题 所以 不能 的人 上海 中心 世界 游戏 需要 价格 用户
    通过 要求 不是 免费 个人 但是 地址 网站 情况 最后 设计 同时 这些 活动 手机 推荐 一些
    主要 大家 发现 目前 文件 你的 不过 评论 生产 美国 图片 经济 功能 国际 的是 选择 其他
    这样 会员 环境 来自 日期 成为 他的 最新 专业 一下 人员 任何 教育 资料 状态 都是 点击
    为了 不会 出现 知道 社会 名称 而且 介绍 音乐 等级 可能 这种 建设 朋友 虽然 电子 资源
    看到 精华 电影 如何 新闻 阅读 安全 全国 只有 回复 大学 学生 学习 关于 项目 不同 以及
    有关 那么 开发 还有 只是 非常 研究 广告 首页 方法 希望 地方 也是 单位 怎么 应该 今天
    以上 更新 帖子 显示 能力 电脑 记者 查看 位置 不要 由于 无法 详细 投资 是一 一般 进入
    发生 这里 感觉 更多 你们 的话 起来 标准 一样 认为 女人 那个 设备 搜索 之后 然后 学校
    销售 组织 说明 提高 为什 作品 或者 喜欢 东西 方面 简介 必须 经营 科技 作为 其中 运行
    工程 解决 操作 经验 地区 重要 直接 登录 合作 结果 影响 这是 行业 对于 表示 程序 包括
    留言 规定 处理 男人 各种 部门 数据 具有 商品 系列 大小 因此 关系 可是 比较 文化 一直
    法律 这么 您的 城市 分析 基本 最大 类别 两个 日本 得到 一次 继续 成功 她的 责任 深圳
    业务 欢迎 加入 能够 觉得 部分 中文 根据 人民 政府 控制 其实 之间 一种 威望 实现 语言
    出来 谢谢 社区 品牌 是否 工具 完全 决定 很多 网上 事情 今年 国内 以后 制作 浏览 过程
    完成 类型 来源 质量 有些 一起 当然 汽车 一点 帮助 增加 历史 以下 不断 应用 那些 密码
    计划 如此 次数 到了 拥有 孩子 原因 参加 只要 报告 当前 客户 正在 注意 标题 空间 一定
    一切 特别 全部 准备
"""
)

# 256 emoji, some of several code points (every 13th of Faker's emoji)
EMOJI = _pool(
    """
    😀 🥰 😝 😒 🤢 🤓 😨 😤 👽 🙉 💔 💢 👋 🖐🏻 🖖🏼 🤌🏽 ✌🏾 🤟🏿 👈 👆🏻 👇🏼 👍🏽 ✊🏾
    🤛🏿 🙌 🤲🏻 🙏🏼 💅🏽 💪🏾 🦶🏽 🦻🏾 👀 🧒🏽 👧🏾 👱🏿 🧔‍♂️ 👨🏻‍🦰 👨🏼‍🦳 👩🏽
    🧑🏾‍🦰 🧑🏿‍🦱 👩‍🦲 👱🏻‍♀️ 🧓🏼 👵🏽 🙍🏾‍♂️ 🙎🏿 🙅 🙅🏻‍♀️ 🙆🏼‍♂️ 💁🏽 💁🏾‍♀️
    🙋🏿‍♂️ 🧏‍♂️ 🙇🏻 🙇🏼‍♀️ 🤦🏽‍♂️ 🤷🏾 🤷🏿‍♀️ 👩‍⚕️ 👨🏻‍🎓 🧑🏼‍🏫 👩🏽‍🏫 👨🏾‍⚖️
    🧑🏿‍🌾 🧑‍🍳 👩🏻‍🍳 👨🏼‍🔧 🧑🏽‍🏭 👩🏾‍🏭 👨🏿‍💼 👨‍🔬 🧑🏻‍💻 👩🏼‍💻 👨🏽‍🎤
    🧑🏾‍🎨 👩🏿‍🎨 👩‍✈️ 👨🏻‍🚀 🧑🏼‍🚒 👩🏽‍🚒 👮🏾‍♂️ 🕵🏿 💂 💂🏻‍♀️ 👷🏼 👷🏽‍♀️ 👸🏾
    👳🏿‍♂️ 🧕 🤵🏻‍♂️ 👰🏼 👰🏽‍♀️ 🤱🏾 👨🏿‍🍼 🎅 🧑🏻‍🎄 🦸🏼‍♂️ 🦹🏽 🦹🏾‍♀️ 🧙🏿‍♂️
    🧚‍♂️ 🧛🏻 🧛🏼‍♀️ 🧜🏽‍♂️ 🧝🏾 🧝🏿‍♀️ 💆‍♂️ 💇🏻 💇🏼‍♀️ 🚶🏽‍♂️ 🧍🏾 🧍🏿‍♀️ 🧎‍♀️
    👨🏻‍🦯 🧑🏼‍🦼 👩🏽‍🦼 👨🏾‍🦽 🏃🏿 💃 🕴🏻 🧖🏿 🧗 🧗🏻‍♀️ 🏂 🏌🏻‍♂️ 🏄🏼 🏄🏽‍♀️
    🚣🏾‍♂️ 🏊🏿 ⛹️ ⛹🏻‍♀️ 🏋🏼‍♂️ 🚴🏽 🚴🏾‍♀️ 🚵🏿‍♂️ 🤸‍♂️ 🤼‍♂️ 🤽🏿‍♂️ 🤾‍♂️ 🤹🏻
    🤹🏼‍♀️ 🧘🏽‍♂️ 🛀🏾 🧑🏻‍🤝‍🧑🏿 🧑🏾‍🤝‍🧑🏽 👩🏻‍🤝‍👩🏿 👩🏾‍🤝‍👩🏽 👩🏻‍🤝‍👨🏿
    👩🏾‍🤝‍👨🏽 👨🏻‍🤝‍👨🏿 👨🏾‍🤝‍👨🏽 💏🏿 🧑🏾‍❤️‍💋‍🧑🏻 👩🏻‍❤️‍💋‍👨🏿
    👩🏾‍❤️‍💋‍👨🏽 👨🏻‍❤️‍💋‍👨🏿 👨🏾‍❤️‍💋‍👨🏽 👩🏻‍❤️‍💋‍👩🏿 👩🏾‍❤️‍💋‍👩🏽 💑🏿
    🧑🏾‍❤️‍🧑🏻 👩🏻‍❤️‍👨🏿 👩🏾‍❤️‍👨🏽 👨🏻‍❤️‍👨🏿 👨🏾‍❤️‍👨🏽 👩🏻‍❤️‍👩🏿
    👩🏾‍❤️‍👩🏽 👨‍👩‍👧‍👧 👨‍👧 🐵 🐈 🐂 🦒 🦔 🐔 🪶 🐳 🐜 💐 🌳 🍊 🍅 🧄 🧀 🥙 🍱 🍡 🍪
    🫖 🧃 🗺️ 🏛️ 🏥 ⛪ 🌆 🚆 🚒 🏍️ ⛽ 🚢 🛸 🕜 🕗 🌖 🌟 🌫️ 🔥 🎍 🏅 🎳 🤿 🕹️ 🀄 🦺 🩳 👠 💍
    🎶 🪕 🖨️ 📺 📕 📑 ✉️ ✏️ 🗒️ ✂️ ⚒️ 🗜️ 🔬 🛋️ 🪣 🚮 🚸 ↗️ 🔃 ✝️ ♏ ◀️ 🔆 ⁉️ 🔰 ©️ 8️⃣ 🆓 🈂️
    ㊙️ 🟧 ▫️ 🎌 🇦🇲 🇧🇪 🇧🇹 🇨🇱 🇩🇬
"""
)


def draw(seed: int, plain: int, per_kind: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words of the vocabulary for ``seed``: ``plain`` ASCII words, and ``per_kind``
    each of accented, Japanese, Chinese and emoji ones (the multi-byte words, in that
    order), all distinct, the same on every run and platform."""
    rng = random.Random(seed)
    multibyte = (
        w for pool in (ACCENTED, JAPANESE, CHINESE, EMOJI) for w in rng.sample(pool, per_kind)
    )
    return tuple(rng.sample(PLAIN, plain)), tuple(multibyte)
